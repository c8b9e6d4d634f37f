import { join } from 'node:path'
import { DEMO_ORG_ID } from '../src/seed/demo.js'
import { createEmbeddedStore } from '../src/store/embedded/embedded.js'
import { crowdStatements } from './data.js'
import { httpLoad, type LoadResult } from './load.js'
import type { LoadSettings, Log } from './measure.js'
import { metered } from './meter.js'
import { crowdPages, type EmbeddedPage, PAGE_SIZE, pathOf } from './mixes.js'
import type { Crowd } from './options.js'
import { pacedLoad } from './paced.js'
import { statusKb } from './proc.js'
import { type EmbeddedTarget, type LoopDelay, startEmbedded } from './servers.js'

export interface EmbeddedMix {
  readonly id: string
  readonly label: string
  readonly path: string
  readonly result: LoadResult
  readonly serverCpu: number
  /** Per cent of one core used by other processes meanwhile. */
  readonly otherCpu: number
  readonly loopDelay: LoopDelay
  /** Latency at half the saturation rate, evenly paced (the crowd's pages only). */
  readonly half?: LoadResult
}

export interface EmbeddedResult {
  readonly mixes: EmbeddedMix[]
  /** Peak RSS of the server, in MB. */
  readonly rssMb: number
}

/** The demo organization has 300 customers and 600 appointments. */
const MIXES: readonly EmbeddedPage[] = [
  {
    id: 'emb-cus-first',
    label: 'customers · demo · first',
    path: `/api/public/v1/customers?limit=${PAGE_SIZE}`,
  },
  {
    id: 'emb-apt-status',
    label: 'appointments · demo · first, status',
    path: `/api/public/v1/appointments?limit=${PAGE_SIZE}&status=completed`,
  },
  {
    id: 'emb-apt-last',
    label: 'appointments · demo · last',
    path: `/api/public/v1/appointments?limit=${PAGE_SIZE}&offset=${600 - PAGE_SIZE}`,
  },
]

async function measureAll(
  target: EmbeddedTarget,
  settings: LoadSettings,
  log: Log,
  mixes: readonly EmbeddedPage[],
  halfLoad: boolean,
): Promise<EmbeddedMix[]> {
  const measured: EmbeddedMix[] = []
  for (const mix of mixes) {
    const load = {
      url: target.baseUrl + mix.path,
      headers: { authorization: `Bearer ${target.key}` },
      connections: settings.connections,
    }
    if (settings.warmup > 0) await httpLoad({ ...load, seconds: settings.warmup })
    await target.loopDelay()
    const { result, usage } = await metered(
      target.service.pid,
      async () => [],
      () => httpLoad({ ...load, seconds: settings.duration }),
    )
    const loopDelay = await target.loopDelay()
    log(
      `${target.name} ${mix.id}: ${Math.round(result.rps)}/s (node ${Math.round(usage.serverCpu ?? 0)}%, ` +
        `others ${Math.round(usage.otherCpu)}%), p99 ${result.p99?.toFixed(1)} ms, event-loop delay p99 ${loopDelay.p99} ms`,
    )
    let half: LoadResult | undefined
    if (halfLoad) {
      const rate = Math.max(1, result.rps / 2)
      half = await pacedLoad({ ...load, seconds: Math.max(settings.duration, Math.ceil(12 / rate)), rate })
      log(
        `${target.name} ${mix.id}: at ${Math.round(half.rps)}/s p50 ${half.p50?.toFixed(2)} p99 ${half.p99?.toFixed(2)} ms`,
      )
    }
    measured.push({
      ...mix,
      result,
      serverCpu: usage.serverCpu ?? 0,
      otherCpu: usage.otherCpu,
      loopDelay,
      ...(half ? { half } : {}),
    })
  }
  return measured
}

/** openbook on the embedded store in a fresh DATA_DIR: the demo organization it seeds at its first start. */
export async function measureEmbedded(
  workDir: string,
  settings: LoadSettings,
  log: Log,
  onStart: (stop: () => Promise<void>) => void,
  openbookDir = '.',
  crowd?: Crowd,
): Promise<EmbeddedResult> {
  const dataDir = join(workDir, 'embedded-data')
  let target = await startEmbedded(dataDir, openbookDir)
  onStart(target.service.stop)
  let mixes = await measureAll(target, settings, log, MIXES, false)
  if (crowd) {
    // The crowd goes into the demo organization, whose key the first start printed.
    await target.service.stop()
    const now = new Date()
    const started = performance.now()
    const store = await createEmbeddedStore(dataDir, { statementTimeoutMs: 3_600_000 })
    try {
      await store.admin(async (sql) => {
        for (const statement of crowdStatements(DEMO_ORG_ID, crowd, now, false)) await sql.exec(statement)
      })
      await store.maintain('VACUUM ANALYZE')
    } finally {
      await store.close()
    }
    log(
      `embedded: the ${crowd.shape} crowd added to the demo in ${Math.round((performance.now() - started) / 1000)} s`,
    )
    target = await startEmbedded(dataDir, openbookDir, target.key)
    onStart(target.service.stop)
    const key = target.key
    const totalOf = async (request: Parameters<typeof pathOf>[0]) => {
      const path = pathOf({ ...request, page: { limit: 1, offset: 0 } })
      const response = await fetch(target.baseUrl + path, {
        headers: { authorization: `Bearer ${key}` },
      }).catch((error: Error) => {
        // What the server did is what tells a lost connection's cause (a run once failed so).
        const state = target.service.exitReason() ?? 'still running'
        throw new Error(`${path}: ${error.message} (${String(error.cause ?? '')}); the server ${state}`)
      })
      return ((await response.json()) as { pagination: { total: number } }).pagination.total
    }
    mixes = [...mixes, ...(await measureAll(target, settings, log, await crowdPages(now, totalOf), true))]
  }
  const rssMb = statusKb(target.service.pid, 'VmHWM') / 1024
  await target.service.stop()
  return { mixes, rssMb }
}
