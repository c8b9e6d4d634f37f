import { type ChildProcess, type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** Where the tests' embedded data directories go: memory (/dev/shm) where there is one. */
export function scratchRoot(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : tmpdir()
}

/** Ports this process has handed out: the kernel may give a closed one again at once. */
const handedOut = new Set<number>()

/**
 * A port nobody listens on, never one this process handed out before: a test that asks for PORT
 * and OPS_PORT before its server listens on either must not get the same port twice (the server
 * then stops with "OPS_PORT equals PORT").
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer()
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => {
        const address = server.address()
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
      })
    })
    if (!handedOut.has(port)) {
      handedOut.add(port)
      return port
    }
  }
}

export interface RunningProcess {
  readonly child: ChildProcess
  output(): string
  /**
   * Resolves when the combined output matches, rejects on exit or after `ms`: by default long
   * enough for a first start on a busy machine (PGlite's initdb and the demo seed took over 20 s
   * on 2 shared cores); a hang still fails, at the test's time-out.
   */
  waitFor(pattern: RegExp, ms?: number): Promise<string>
  exited(): Promise<number | null>
}

/** Environment without the variables that would point a child at the developer's own store. */
export function cleanEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of [
    'DATABASE_URL',
    'DATA_DIR',
    'DATA_DIR_TEMPLATE',
    'PORT',
    'HOST',
    'API_KEY_BRAND',
    'LOG_LEVEL',
    'OPS_HOST',
    'SHUTDOWN_DELAY_MS',
  ])
    delete env[name]
  // Servers started side by side by parallel test files must not share the default ops port.
  env.OPS_PORT = '0'
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) env[name] = value
  return env
}

export function start(command: string, args: readonly string[], env: NodeJS.ProcessEnv): RunningProcess {
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let text = ''
  const listeners = new Set<() => void>()
  const append = (chunk: Buffer) => {
    text += chunk.toString()
    for (const listener of listeners) listener()
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return {
    child,
    output: () => text,
    exited: () => exit,
    waitFor(pattern, ms = 45_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(text)
          if (match) {
            cleanup()
            resolve(match[0])
          }
        }
        const timer = setTimeout(() => {
          cleanup()
          reject(new Error(`timed out waiting for ${pattern}; output:\n${text}`))
        }, ms)
        const cleanup = () => {
          clearTimeout(timer)
          listeners.delete(check)
        }
        listeners.add(check)
        void exit.then(() => {
          if (listeners.has(check)) {
            cleanup()
            reject(new Error(`exited before ${pattern}; output:\n${text}`))
          }
        })
        check()
      })
    },
  }
}

/** A child whose output is gathered as text: what it wrote so far, and its exit code once closed. */
export interface Collected {
  readonly child: ChildProcessWithoutNullStreams
  readonly stdout: () => string
  readonly stderr: () => string
  readonly closed: Promise<number | null>
}

/** Spawns `command` with every stream piped, gathering stdout and stderr. */
export function spawnCollecting(
  command: string,
  args: readonly string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Collected {
  const child = spawn(command, args, { ...options, stdio: ['pipe', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  child.stdin.on('error', () => undefined)
  const closed = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => resolve(code))
  })
  return { child, stdout: () => stdout, stderr: () => stderr, closed }
}
