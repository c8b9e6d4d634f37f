// Preloaded into a measured server (node --import ./bench/memory-probe.mjs dist/server.js), which
// also loads it into its worker threads: each thread samples process.memoryUsage() every 50 ms and
// keeps the largest value of each field, written as JSON to MEMORY_PROBE_DIR/<thread>.json. The
// fields are the thread's own (its isolate's); external counts a WebAssembly memory at its full size,
// resident or not. A thread busy in WebAssembly takes no sample, so the figures are lower bounds.
// Plain JavaScript, so the server runs without a TypeScript loader.
import { renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { isMainThread, threadId } from 'node:worker_threads'

const dir = process.env.MEMORY_PROBE_DIR
if (dir) {
  const file = join(dir, isMainThread ? 'main.json' : `worker-${threadId}.json`)
  const peak = { heapUsed: 0, heapTotal: 0, external: 0, arrayBuffers: 0 }
  const sample = () => {
    const usage = process.memoryUsage()
    const now = {
      heapUsed: usage.heapUsed,
      heapTotal: usage.heapTotal,
      external: usage.external,
      arrayBuffers: usage.arrayBuffers,
    }
    for (const key of Object.keys(peak)) peak[key] = Math.max(peak[key], now[key])
    // Written whole, then renamed: a reader never sees half a file.
    writeFileSync(`${file}.tmp`, JSON.stringify(peak))
    renameSync(`${file}.tmp`, file)
  }
  setInterval(sample, 50).unref()
  sample()
}
