import { Agent, request } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { type LoadResult, percentile } from './load.js'

export interface PacedLoad {
  readonly url: string
  readonly headers: Record<string, string>
  /** Keep-alive connections the requests share. */
  readonly connections: number
  readonly seconds: number
  /** Requests per second, evenly spaced. */
  readonly rate: number
}

/**
 * An open-loop load at a fixed rate (autocannon's own rate limit sends each connection's
 * quota in a burst at the start of every second, which measures its bursts, not the server).
 * Requests are started at even intervals whether or not earlier ones have finished; latency
 * runs from the start of a request (including any wait for a free connection) to the end of
 * its response.
 */
export async function pacedLoad(load: PacedLoad): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: load.connections })
  const latencies: number[] = []
  let failures = 0
  const inFlight = new Set<Promise<void>>()
  const send = () => {
    const done = new Promise<void>((resolve) => {
      const sentAt = performance.now()
      const req = request(load.url, { agent, headers: load.headers }, (response) => {
        response.resume()
        response.on('end', () => {
          if (response.statusCode === 200) latencies.push(performance.now() - sentAt)
          else failures++
          resolve()
        })
      })
      req.setTimeout(10_000, () => req.destroy(new Error('time-out')))
      req.on('error', () => {
        failures++
        resolve()
      })
      req.end()
    })
    inFlight.add(done)
    void done.then(() => inFlight.delete(done))
  }
  const interval = 1000 / load.rate
  const total = Math.max(1, Math.floor(load.seconds * load.rate))
  const start = performance.now()
  for (let sent = 0; sent < total; ) {
    const now = performance.now()
    for (; sent < total && start + sent * interval <= now; sent++) send()
    if (sent < total) await sleep(Math.max(0, Math.min(5, start + sent * interval - performance.now())))
  }
  await Promise.all(inFlight)
  const elapsed = (performance.now() - start) / 1000
  agent.destroy()
  const sorted = Float64Array.from(latencies).sort()
  return {
    rps: sorted.length / elapsed,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    ok: sorted.length,
    failures,
  }
}
