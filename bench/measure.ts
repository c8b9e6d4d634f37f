import type pg from 'pg'
import { httpLoad, type LoadResult, type PgbenchLoad, pgbenchLoad } from './load.js'
import { backendPids, metered, quiesce } from './meter.js'
import { pacedLoad } from './paced.js'
import { combineLatencyRounds, combineRounds, type Saturation, type TargetResult } from './rounds.js'

export type { TargetResult } from './rounds.js'

import type { Target } from './servers.js'

export type Log = (line: string) => void

/** How each target is loaded. */
export interface LoadSettings {
  /** Seconds of each measurement. */
  readonly duration: number
  /**
   * Saturation rounds of each server on each mix, the servers taking turns: ratios between two
   * servers are taken within a round, so that a load that comes and goes on a shared machine falls
   * on both sides of one.
   */
  readonly rounds: number
  /** Seconds of load before a saturation measurement of a server. */
  readonly warmup: number
  /** HTTP connections. */
  readonly connections: number
  /** pgbench clients; also the servers' pool size. */
  readonly poolSize: number
}

function summary(name: string, result: TargetResult): string {
  const ms = (value: number | null) => (value === null ? '-' : value.toFixed(2))
  const cpu = result.saturation.serverCpu === null ? '' : `, node ${Math.round(result.saturation.serverCpu)}%`
  return (
    `${name.padEnd(9)} ${Math.round(result.saturation.rps).toString().padStart(6)}/s` +
    ` (pg ${Math.round(result.saturation.postgresCpu)}%${cpu}, others ${Math.round(result.saturation.otherCpu)}%),` +
    ` at ${Math.round(result.half.rps)}/s p50 ${ms(result.half.p50)} p99 ${ms(result.half.p99)} ms` +
    (result.saturation.failures + result.half.failures > 0
      ? ` FAILURES ${result.saturation.failures + result.half.failures}`
      : '')
  )
}

/** Long enough for at least 12 requests at `rate`, however slow the mix (at most 15 s). */
function latencySeconds(options: LoadSettings, rate: number): number {
  return Math.min(15, Math.max(options.duration, Math.ceil(12 / Math.max(rate, 0.1))))
}

const httpOf = (target: Target, path: string, key: string, options: LoadSettings) => ({
  url: target.baseUrl + path,
  headers: { authorization: `Bearer ${key}`, accept: 'application/json', ...target.headers },
  connections: options.connections,
})

/** One saturation round of `target` on the idle database; `warm`: after `options.warmup` s of load. */
export async function saturate(
  target: Target,
  path: string,
  key: string,
  options: LoadSettings,
  monitor: pg.Client,
  warm: boolean,
): Promise<Saturation> {
  const load = httpOf(target, path, key, options)
  await quiesce(monitor)
  if (warm && options.warmup > 0) await httpLoad({ ...load, seconds: options.warmup })
  const saturation = await metered(target.service.pid, backendPids(monitor, target.applicationName), () =>
    httpLoad({ ...load, seconds: options.duration }),
  )
  return { ...saturation.result, ...saturation.usage }
}

/**
 * Every target loaded at once, each through its own connections, for one round on the idle
 * database: their req/s over the same seconds, so that whatever else the machine does then falls on
 * all of them alike. The targets share the machine, so only their ratios mean something.
 */
export async function loadTogether(
  targets: readonly Target[],
  path: string,
  key: string,
  options: LoadSettings,
  monitor: pg.Client,
): Promise<LoadResult[]> {
  await quiesce(monitor)
  return Promise.all(
    targets.map((target) => httpLoad({ ...httpOf(target, path, key, options), seconds: options.duration })),
  )
}

/** Latency of `target` at `rate`, evenly paced, on the idle database. */
export async function halfLoad(
  target: Target,
  path: string,
  key: string,
  options: LoadSettings,
  monitor: pg.Client,
  rate: number,
): Promise<LoadResult> {
  await quiesce(monitor)
  return pacedLoad({ ...httpOf(target, path, key, options), seconds: latencySeconds(options, rate), rate })
}

/** A target's rounds as one result: saturation rounds, then latency rounds at half its median rate. */
export function targetResult(
  name: string,
  saturation: readonly Saturation[],
  half: readonly LoadResult[],
  log: Log,
): TargetResult {
  const result = {
    saturation: combineRounds(saturation),
    rounds: saturation.map((round) => round.rps),
    half: combineLatencyRounds(half),
    halfP99s: half.map((round) => round.p99),
  }
  log(summary(name, result))
  return result
}

/**
 * Every mix through a server once before any is measured, so that no mix pays for the
 * server's first runs of another mix's code paths (V8 compiles and optimises as it goes).
 */
export async function warmServer(
  target: Target,
  mixes: readonly { path: string; key: string }[],
  options: LoadSettings,
): Promise<void> {
  for (const mix of mixes) {
    await httpLoad({
      url: target.baseUrl + mix.path,
      headers: { authorization: `Bearer ${mix.key}`, accept: 'application/json' },
      connections: options.connections,
      seconds: options.warmup,
    })
  }
}

export const PGBENCH_APPLICATION = 'openbook-bench-pgbench'

/**
 * pgbench as the database's own ceiling (bench/ladder.ts `CEILING`): saturation, metered from its
 * second second on (its connections open in the first), then latency at half that rate.
 */
export async function measurePgbench(
  databaseUrl: string,
  run: Omit<PgbenchLoad, 'databaseUrl' | 'clients' | 'seconds' | 'applicationName'>,
  options: LoadSettings,
  monitor: pg.Client,
  log: Log,
): Promise<TargetResult> {
  const load = {
    ...run,
    databaseUrl,
    clients: options.poolSize,
    seconds: options.duration,
    applicationName: PGBENCH_APPLICATION,
  }
  await quiesce(monitor)
  const saturation = await metered(
    undefined,
    backendPids(monitor, PGBENCH_APPLICATION),
    () => pgbenchLoad({ ...load, seconds: options.duration + 1 }),
    1_000,
  )
  await quiesce(monitor)
  const rate = saturation.result.rps / 2
  const half = await pgbenchLoad({ ...load, seconds: latencySeconds(options, rate), rate })
  const result = { saturation: { ...saturation.result, ...saturation.usage }, half }
  log(summary('pgbench', result))
  return result
}
