// Preloaded into a measured server (node --import ./bench/loop-delay.mjs dist/server.js): samples the
// event-loop delay. Each SIGWINCH writes the delay since the previous one to LOOP_DELAY_FILE as JSON
// (milliseconds), then starts afresh. SIGWINCH because close-with-grace shuts the server down on
// SIGUSR2. Plain JavaScript, so the server runs without a TypeScript loader.
import { renameSync, writeFileSync } from 'node:fs'
import { monitorEventLoopDelay } from 'node:perf_hooks'

const file = process.env.LOOP_DELAY_FILE
if (file) {
  const histogram = monitorEventLoopDelay({ resolution: 10 })
  histogram.enable()
  const ms = (ns) => Math.round(ns / 10_000) / 100
  process.on('SIGWINCH', () => {
    const stats = {
      p50: ms(histogram.percentile(50)),
      p99: ms(histogram.percentile(99)),
      max: ms(histogram.max),
      mean: ms(histogram.mean),
      at: Date.now(),
    }
    // Written whole, then renamed: a reader never sees half a file.
    writeFileSync(`${file}.tmp`, JSON.stringify(stats))
    renameSync(`${file}.tmp`, file)
    histogram.reset()
  })
}
