import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { run } from './proc.js'

export interface LoadResult {
  /** Successful requests (or transactions) per second. */
  readonly rps: number
  readonly p50: number | null
  readonly p99: number | null
  readonly ok: number
  /** Non-2xx answers, connection errors and time-outs (failed transactions for pgbench). */
  readonly failures: number
}

export interface HttpLoad {
  readonly url: string
  readonly headers: Record<string, string>
  readonly connections: number
  readonly seconds: number
}

/** Percentile by nearest rank, in the unit of the values. */
export function percentile(sorted: Float64Array, p: number): number | null {
  if (sorted.length === 0) return null
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank] ?? null
}

/** autocannon from this process on loopback, pipelining 1, as fast as the server answers; latencies to the µs. */
export async function httpLoad(load: HttpLoad): Promise<LoadResult> {
  const latencies: number[] = []
  let failures = 0
  const instance = autocannon({
    url: load.url,
    headers: load.headers,
    connections: load.connections,
    duration: load.seconds,
    pipelining: 1,
    timeout: 10,
  })
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) latencies.push(ms)
    else failures++
  })
  const result = await instance
  const sorted = Float64Array.from(latencies).sort()
  return {
    rps: sorted.length / result.duration,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    ok: sorted.length,
    failures: failures + result.errors + result.timeouts,
  }
}

export interface PgbenchLoad {
  readonly databaseUrl: string
  readonly scriptFile: string
  readonly clients: number
  readonly seconds: number
  readonly rate?: number
  readonly applicationName: string
  /** `simple` (the default): each command's text as it is; `prepared`: each parsed once per client. */
  readonly protocol?: 'simple' | 'prepared'
  /** Settings of each pgbench session (PGOPTIONS, `-c name=value …`). */
  readonly sessionSettings?: Readonly<Record<string, string>>
  /** Script variables (`--define`). */
  readonly variables?: Readonly<Record<string, string>>
}

/** pgbench with a custom script (simple protocol unless told); with a rate, latencies from its transaction log. */
export async function pgbenchLoad(load: PgbenchLoad): Promise<LoadResult> {
  const logDir = load.rate ? mkdtempSync(join(load.scriptFile, '..', 'pgbench-log-')) : undefined
  const args = [
    '--no-vacuum',
    `--protocol=${load.protocol ?? 'simple'}`,
    ...Object.entries(load.variables ?? {}).map(([name, value]) => `--define=${name}=${value}`),
    `--client=${load.clients}`,
    '--jobs=2',
    `--time=${load.seconds}`,
    `--file=${load.scriptFile}`,
    ...(load.rate && logDir
      ? [`--rate=${Math.max(0.1, load.rate).toFixed(2)}`, '--log', `--log-prefix=${join(logDir, 'tx')}`]
      : []),
    load.databaseUrl,
  ]
  try {
    const result = await run('pgbench', args, {
      env: {
        ...process.env,
        PGAPPNAME: load.applicationName,
        ...(load.sessionSettings ? { PGOPTIONS: pgOptions(load.sessionSettings) } : {}),
      },
      timeoutMs: (load.seconds + 30) * 1000,
    })
    const output = result.stdout + result.stderr
    const processed = Number(
      /number of transactions actually processed: (\d+)/.exec(output)?.[1] ?? Number.NaN,
    )
    const tps =
      /tps = ([\d.]+) \(without initial connection time\)/.exec(output)?.[1] ??
      (processed === 0 ? '0' : undefined)
    if (result.code !== 0 || tps === undefined) {
      throw new Error(`pgbench failed (${result.code}): ${output.trim().split('\n').slice(-3).join(' | ')}`)
    }
    const failed = Number(/number of failed transactions: (\d+)/.exec(output)?.[1] ?? 0)
    const sorted = logDir ? readLatencies(logDir) : new Float64Array()
    return {
      rps: Number(tps),
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      ok: processed,
      failures: failed,
    }
  } finally {
    if (logDir) rmSync(logDir, { recursive: true, force: true })
  }
}

/** Settings as PGOPTIONS: `-c name=value`, spaces and backslashes escaped. */
export function pgOptions(settings: Readonly<Record<string, string>>): string {
  return Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value.replace(/[\\ ]/g, (c) => `\\${c}`)}`)
    .join(' ')
}

/** Transaction latencies in ms from pgbench's per-transaction logs (third field, microseconds). */
function readLatencies(dir: string): Float64Array {
  const values: number[] = []
  for (const file of readdirSync(dir)) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      const micros = Number(line.split(' ')[2])
      if (line && Number.isFinite(micros)) values.push(micros / 1000)
    }
  }
  return Float64Array.from(values).sort()
}
