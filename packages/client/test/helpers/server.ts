import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { patience } from './patience.js'

/** The repository's root: the server is started from its build there. */
export const REPOSITORY_ROOT = fileURLToPath(new URL('../../../../', import.meta.url))

/** A running `node dist/server.js` and the operator CLI on its store. */
export interface ServerProcess {
  /** e.g. http://127.0.0.1:41234 */
  readonly baseUrl: string
  /** Everything the server printed. */
  output(): string
  /** Runs `openbook import -` against this server's store with these NDJSON lines. */
  importLines(lines: readonly object[]): Promise<string>
  /**
   * Starts `openbook import -` now, and gives it its lines later: the process has started (Node,
   * the CLI, the store) by the time they are sent, so the import commits a moment after.
   */
  importLater(): (lines: readonly object[]) => Promise<string>
  /** Runs the operator CLI against this server's store. */
  cli(args: readonly string[], input?: string): Promise<string>
  stop(): Promise<void>
}

/** A server on a fresh embedded store, with the demo organization it seeds. */
export interface TestServer extends ServerProcess {
  /** The demo organization's test key, printed by the server on first start. */
  readonly key: string
  readonly dataDir: string
}

/** Environment without the developer's own store or ports. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of ['DATABASE_URL', 'DATABASE_READ_URL', 'DATA_DIR', 'PORT', 'HOST', 'API_KEY_BRAND'])
    delete env[name]
  return { ...env, OPS_PORT: '0', LOG_LEVEL: 'info', ...extra }
}

/** Starts the operator CLI; the returned function ends its input with `input` and waits for it. */
function start(args: readonly string[], env: NodeJS.ProcessEnv): (input?: string) => Promise<string> {
  const child = spawn(process.execPath, [join(REPOSITORY_ROOT, 'bin/openbook.js'), ...args], {
    cwd: REPOSITORY_ROOT,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  child.stderr.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  const exited = new Promise<string>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code === 0) resolve(out)
      else reject(new Error(`openbook ${args.join(' ')} exited ${code}: ${out}`))
    })
  })
  // An early failure is reported when the caller waits for it.
  exited.catch(() => {})
  return (input) => {
    child.stdin.end(input ?? '')
    return exited
  }
}

function run(args: readonly string[], env: NodeJS.ProcessEnv, input?: string): Promise<string> {
  return start(args, env)(input)
}

const ndjson = (lines: readonly object[]) => `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`

/**
 * Spawns `node dist/server.js` with `env`; resolves once it listens (and, with `withKey`, once it
 * printed the demo's key).
 */
async function spawnServer(
  env: NodeJS.ProcessEnv,
  withKey: boolean,
): Promise<ServerProcess & { key: string | undefined }> {
  const child: ChildProcess = spawn(process.execPath, [join(REPOSITORY_ROOT, 'dist/server.js')], {
    cwd: REPOSITORY_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  const ready = new Promise<{ baseUrl: string; key: string | undefined }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${text}`)), patience(120_000))
    const onData = (chunk: Buffer) => {
      text += chunk.toString()
      const listening = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(text)
      const key = /\b([a-z][a-z0-9]*_test_[0-9a-f]{64})\b/.exec(text)
      if (listening?.[1] && (key?.[1] || !withKey)) {
        clearTimeout(timer)
        resolve({ baseUrl: listening[1], key: key?.[1] })
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited (${code}) before listening:\n${text}`))
    })
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const { baseUrl, key } = await ready
  return {
    baseUrl,
    key,
    output: () => text,
    importLines: (lines) => run(['import', '-'], env, ndjson(lines)),
    importLater() {
      const finish = start(['import', '-'], env)
      return (lines) => finish(ndjson(lines))
    },
    cli: (args, input) => run(args, env, input),
    async stop() {
      child.kill('SIGTERM')
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(killer)
    },
  }
}

/**
 * Starts `node dist/server.js` (the root's build) on a fresh embedded store in a temporary
 * directory, on a free port; resolves once it listens, with the demo's key.
 */
export async function startServer(): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'openbook-client-'))
  const env = cleanEnv({ DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1' })
  const server = await spawnServer(env, true)
  return {
    ...server,
    key: server.key ?? '',
    dataDir,
    async stop() {
      await server.stop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/**
 * Migrates the PostgreSQL database at `databaseUrl` with `openbook migrate`, then starts
 * `node dist/server.js` on it, on a free port. No demo is seeded there: the caller imports its
 * organization and creates its key with the CLI.
 */
export async function startPostgresServer(databaseUrl: string): Promise<ServerProcess> {
  const env = cleanEnv({ DATABASE_URL: databaseUrl, PORT: '0', HOST: '127.0.0.1' })
  await run(['migrate'], env)
  return spawnServer(env, false)
}
