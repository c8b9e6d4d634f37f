import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository's root: the server is started from its build there. */
export const REPOSITORY_ROOT = fileURLToPath(new URL('../../../../', import.meta.url))

export interface TestServer {
  /** e.g. http://127.0.0.1:41234 */
  readonly baseUrl: string
  /** The demo organization's test key, printed by the server on first start. */
  readonly key: string
  readonly dataDir: string
  /** Everything the server printed. */
  output(): string
  /** Runs `openbook import -` against this server's store with these NDJSON lines. */
  importLines(lines: readonly object[]): Promise<string>
  /** Runs the operator CLI against this server's store. */
  cli(args: readonly string[], input?: string): Promise<string>
  stop(): Promise<void>
}

/** Environment without the developer's own store or ports. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of ['DATABASE_URL', 'DATABASE_READ_URL', 'DATA_DIR', 'PORT', 'HOST', 'API_KEY_BRAND'])
    delete env[name]
  return { ...env, OPS_PORT: '0', LOG_LEVEL: 'info', ...extra }
}

function run(args: readonly string[], env: NodeJS.ProcessEnv, input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
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
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code === 0) resolve(out)
      else reject(new Error(`openbook ${args.join(' ')} exited ${code}: ${out}`))
    })
    child.stdin.end(input ?? '')
  })
}

/**
 * Starts `node dist/server.js` (the root's build) on a fresh embedded store in a temporary
 * directory, on a free port; resolves once it listens, with the demo's key.
 */
export async function startServer(): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'openbook-client-'))
  const env = cleanEnv({ DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1' })
  const child: ChildProcess = spawn(process.execPath, [join(REPOSITORY_ROOT, 'dist/server.js')], {
    cwd: REPOSITORY_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  const ready = new Promise<{ baseUrl: string; key: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${text}`)), 120_000)
    const onData = (chunk: Buffer) => {
      text += chunk.toString()
      const listening = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(text)
      const key = /\b([a-z][a-z0-9]*_test_[0-9a-f]{64})\b/.exec(text)
      if (listening?.[1] && key?.[1]) {
        clearTimeout(timer)
        resolve({ baseUrl: listening[1], key: key[1] })
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
    dataDir,
    output: () => text,
    importLines: (lines) =>
      run(['import', '-'], env, `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`),
    cli: (args, input) => run(args, env, input),
    async stop() {
      child.kill('SIGTERM')
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(killer)
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
