import type pg from 'pg'
import { cpuSeconds, machineBusySeconds, ownCpuSeconds, statusKb } from './proc.js'

const SAMPLE_EVERY_MS = 250

/**
 * CPU used by a changing set of processes over a measurement, from /proc: a process
 * there at the start counts from then, one that appears later (a new connection's
 * backend) counts whole, each up to its last sample. Also the largest resident set seen.
 */
export class Meter {
  private readonly first = new Map<number, number>()
  private readonly last = new Map<number, number>()
  private timer: NodeJS.Timeout | undefined
  private current: Promise<void> | undefined
  private startedAt = 0
  private maxRssKb = 0
  private sampled = false

  constructor(private readonly pids: () => Promise<readonly number[]>) {}

  async start(): Promise<void> {
    this.startedAt = performance.now()
    await this.sample()
    this.timer = setInterval(() => {
      this.current ??= this.sample().finally(() => {
        this.current = undefined
      })
    }, SAMPLE_EVERY_MS)
  }

  /** Per cent of one core, averaged over the measurement, and the largest RSS in MB. */
  async stop(): Promise<{ cpuPercent: number; maxRssMb: number }> {
    clearInterval(this.timer)
    await this.current
    await this.sample()
    const seconds = (performance.now() - this.startedAt) / 1000
    let used = 0
    for (const [pid, end] of this.last) used += end - (this.first.get(pid) ?? end)
    return { cpuPercent: seconds > 0 ? (100 * used) / seconds : 0, maxRssMb: this.maxRssKb / 1024 }
  }

  private async sample(): Promise<void> {
    for (const pid of await this.pids()) {
      const used = cpuSeconds(pid)
      if (used === undefined) continue
      if (!this.first.has(pid)) this.first.set(pid, this.sampled ? 0 : used)
      this.last.set(pid, used)
      this.maxRssKb = Math.max(this.maxRssKb, statusKb(pid, 'VmRSS'))
    }
    this.sampled = true
  }
}

/**
 * The server processes of the connections a client names with `application_name`, with the
 * parallel workers they lead at the moment of sampling (short-lived: those that start and end
 * between two samples count under "others").
 */
export function backendPids(monitor: pg.Client, applicationName: string): () => Promise<number[]> {
  return async () => {
    const { rows } = await monitor.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
       WHERE datname = current_database()
         AND (application_name = $1
              OR leader_pid IN (SELECT pid FROM pg_stat_activity WHERE application_name = $1))`,
      [applicationName],
    )
    return rows.map((row) => row.pid)
  }
}

/**
 * Waits (at most 30 s) until none of the benchmark's connections (application_name
 * openbook-bench-…) runs a statement, twice in a row: what a target still owes from the
 * previous measurement must not slow down the next one.
 */
export async function quiesce(monitor: pg.Client): Promise<void> {
  let idleChecks = 0
  for (let attempt = 0; attempt < 300 && idleChecks < 2; attempt++) {
    const { rows } = await monitor.query<{ busy: number }>(
      `SELECT count(*)::int AS busy FROM pg_stat_activity
       WHERE datname = current_database() AND application_name LIKE 'openbook-bench-%'
         AND state = 'active' AND pid <> pg_backend_pid()`,
    )
    idleChecks = rows[0]?.busy === 0 ? idleChecks + 1 : 0
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

export interface Usage {
  /** Per cent of one core: the measured Node process (null for pgbench). */
  readonly serverCpu: number | null
  /** Per cent of one core: the PostgreSQL backends serving it. */
  readonly postgresCpu: number
  /**
   * Per cent of one core used by everything else on the machine (other processes, PostgreSQL's
   * background work) besides the load generator: what the measurement competed with.
   */
  readonly otherCpu: number
}

/**
 * Runs `work` while metering the server process (if any) and its PostgreSQL backends; with
 * `afterMs`, from that long after `work` began (a pgbench run's first second opens its
 * connections: a backend's start and its first plans cost milliseconds, which a slow target's few
 * hundred transactions would otherwise share).
 */
export async function metered<T>(
  serverPid: number | undefined,
  postgresPids: () => Promise<readonly number[]>,
  work: () => Promise<T>,
  afterMs = 0,
): Promise<{ result: T; usage: Usage }> {
  const server = serverPid === undefined ? undefined : new Meter(async () => [serverPid])
  const postgres = new Meter(postgresPids)
  const running = afterMs > 0 ? work() : undefined
  if (afterMs > 0) await new Promise((resolve) => setTimeout(resolve, afterMs))
  await Promise.all([server?.start(), postgres.start()])
  const startedAt = performance.now()
  const machineBefore = machineBusySeconds()
  const ownBefore = ownCpuSeconds()
  const result = await (running ?? work())
  const seconds = (performance.now() - startedAt) / 1000
  const machine = (100 * (machineBusySeconds() - machineBefore)) / seconds
  const own = (100 * (ownCpuSeconds() - ownBefore)) / seconds
  const [serverUse, postgresUse] = await Promise.all([server?.stop(), postgres.stop()])
  const serverCpu = serverUse ? serverUse.cpuPercent : null
  const otherCpu = Math.max(0, machine - own - (serverCpu ?? 0) - postgresUse.cpuPercent)
  return { result, usage: { serverCpu, postgresCpu: postgresUse.cpuPercent, otherCpu } }
}
