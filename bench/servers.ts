import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, type Service, startService } from './proc.js'

export interface Target {
  readonly name: string
  readonly service: Service
  /** application_name of its PostgreSQL connections. */
  readonly applicationName: string
  readonly baseUrl: string
  /** Request headers this target is loaded with besides the key (an `Accept-Encoding`). */
  readonly headers?: Readonly<Record<string, string>>
}

/**
 * The environment `npm start` gives the server by default (`NAME=${NAME:-value}` in the package's
 * start script): the benchmarks start dist/server.js as users start it.
 */
export function startScriptEnv(): NodeJS.ProcessEnv {
  const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> })
    .scripts
  const defaults = [...(scripts.start ?? '').matchAll(/\b([A-Z_]+)=\$\{\1:-([^}]*)\}/g)]
  return Object.fromEntries(defaults.map(([, name, value]) => [name, value]))
}

const quietEnv = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  ...extra,
})

async function start(
  name: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  applicationName: string,
  timeoutMs?: number,
): Promise<Target> {
  const port = await freePort()
  const service = await startService(
    process.execPath,
    args,
    quietEnv({ ...env, PORT: String(port) }),
    port,
    timeoutMs,
  )
  return { name, service, applicationName, baseUrl: `http://127.0.0.1:${port}` }
}

/**
 * The minimal node:http + pg handler (bench/baseline-server.ts); a variant of it named `name`,
 * with `env` besides (its `PIPELINE_DEPTH`), has connections of its own application_name.
 */
export function startBaseline(
  databaseUrl: string,
  poolSize: number,
  variant: { readonly name: string; readonly env: NodeJS.ProcessEnv } = { name: 'baseline', env: {} },
): Promise<Target> {
  const applicationName = `openbook-bench-${variant.name}`
  return start(
    variant.name,
    ['--import', 'tsx', 'bench/baseline-server.ts'],
    {
      DATABASE_URL: `${databaseUrl}?application_name=${applicationName}`,
      POOL_SIZE: String(poolSize),
      ...variant.env,
    },
    applicationName,
  )
}

/** A server that does no work (bench/static-server.ts): the latency floor of the machine. */
export function startStatic(): Promise<Target> {
  return start('static', ['--import', 'tsx', 'bench/static-server.ts'], {}, 'none')
}

/** How a variant of an openbook server differs: environment, and a module preloaded with `--import`. */
export interface OpenbookVariant {
  readonly env?: NodeJS.ProcessEnv
  readonly preload?: string
}

/**
 * An openbook build on PostgreSQL, as `npm start` runs it: `dir` holds the build (dist/server.js),
 * the repository's root for the current one, a worktree for an older one. `name` also names its
 * PostgreSQL connections (application_name openbook-bench-<name>), whose CPU is metered.
 */
export function startOpenbook(
  name: string,
  dir: string,
  databaseUrl: string,
  variant: OpenbookVariant = {},
): Promise<Target> {
  const applicationName = `openbook-bench-${name}`
  return start(
    name,
    [...(variant.preload ? ['--import', variant.preload] : []), join(dir, 'dist/server.js')],
    {
      ...startScriptEnv(),
      DATABASE_URL: `${databaseUrl}?application_name=${applicationName}`,
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      ...variant.env,
    },
    applicationName,
  )
}

/** Event-loop delay in ms, from the preloaded sampler (bench/loop-delay.mjs). */
export interface LoopDelay {
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly mean: number
  readonly at: number
}

export interface EmbeddedTarget extends Target {
  readonly key: string
  /** Event-loop delay since the previous call. */
  loopDelay(): Promise<LoopDelay>
}

/**
 * openbook on the embedded store in a fresh DATA_DIR: its first start seeds the demo
 * organization and prints the demo key, which is read from its output.
 */
export async function startEmbedded(dataDir: string, dir = '.', knownKey?: string): Promise<EmbeddedTarget> {
  const delayFile = join(dataDir, '..', 'loop-delay.json')
  const target = await start(
    'openbook-embedded',
    ['--import', './bench/loop-delay.mjs', join(dir, 'dist/server.js')],
    {
      ...startScriptEnv(),
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      LOOP_DELAY_FILE: delayFile,
    },
    'pglite',
    // A new DATA_DIR is created (initdb, migrations, the demo) before the server listens.
    120_000,
  )
  // A DATA_DIR started before prints no key again: its first start's is given.
  let key: string | undefined = knownKey
  for (let attempt = 0; attempt < 50 && !key; attempt++) {
    key = /\b([a-z][a-z0-9]*_test_[0-9a-f]{64})\b/.exec(target.service.stdout())?.[1]
    if (!key) await sleep(100)
  }
  if (!key) throw new Error('the embedded server printed no demo key')
  const read = (): LoopDelay | undefined =>
    existsSync(delayFile) ? (JSON.parse(readFileSync(delayFile, 'utf8')) as LoopDelay) : undefined
  const loopDelay = async () => {
    const before = read()?.at
    const exited = target.service.exitReason()
    if (exited) throw new Error(`the embedded server ${exited}`)
    process.kill(target.service.pid, 'SIGWINCH')
    for (let attempt = 0; attempt < 100; attempt++) {
      const stats = read()
      if (stats && stats.at !== before) return stats
      await sleep(20)
    }
    throw new Error('the embedded server wrote no event-loop delay')
  }
  return { ...target, key, loopDelay }
}
