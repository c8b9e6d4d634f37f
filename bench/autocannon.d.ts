// The few parts of autocannon's API the benchmark uses (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events'

  export interface Options {
    url: string
    connections?: number
    /** Seconds. */
    duration?: number
    pipelining?: number
    headers?: Record<string, string>
    /** Seconds before a request counts as timed out. */
    timeout?: number
  }

  export interface Result {
    errors: number
    timeouts: number
    non2xx: number
    /** Seconds. */
    duration: number
    requests: { total: number; average: number }
  }

  export interface Instance extends EventEmitter, PromiseLike<Result> {
    stop(): void
  }

  // CommonJS (module.exports = autocannon): Node's ESM loader hands it over as the default export.
  export default function autocannon(options: Options): Instance
}
