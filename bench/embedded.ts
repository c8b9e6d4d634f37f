import { join } from 'node:path'
import { httpLoad, type LoadResult } from './load.js'
import type { LoadSettings, Log } from './measure.js'
import { metered } from './meter.js'
import { PAGE_SIZE } from './mixes.js'
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
}

export interface EmbeddedResult {
  readonly mixes: EmbeddedMix[]
  /** Peak RSS of the server, in MB. */
  readonly rssMb: number
}

/** The demo organization has 300 customers and 600 appointments. */
const MIXES = [
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
] as const

async function measureAll(target: EmbeddedTarget, settings: LoadSettings, log: Log): Promise<EmbeddedMix[]> {
  const measured: EmbeddedMix[] = []
  for (const mix of MIXES) {
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
    measured.push({ ...mix, result, serverCpu: usage.serverCpu ?? 0, otherCpu: usage.otherCpu, loopDelay })
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
): Promise<EmbeddedResult> {
  const target = await startEmbedded(join(workDir, 'embedded-data'), openbookDir)
  onStart(target.service.stop)
  const mixes = await measureAll(target, settings, log)
  const rssMb = statusKb(target.service.pid, 'VmHWM') / 1024
  await target.service.stop()
  return { mixes, rssMb }
}
