import { availableParallelism, loadavg } from 'node:os'

/**
 * A test's or hook's time limit, stretched by how busy the machine is when the test file starts:
 * `ms` on an idle machine, and that many times more per runnable process beyond the cores (on 2
 * cores at load 10: five times). Limits are there to end a test that hangs, not to race a slow
 * machine: the same set-up that takes 20 s alone took over a minute at load 5-10.
 */
export function patience(ms: number): number {
  return Math.round(ms * loadFactor())
}

/** The 1-minute load average over the cores, never below 1. */
export function loadFactor(): number {
  const [load = 0] = loadavg()
  return Math.max(1, load / availableParallelism())
}
