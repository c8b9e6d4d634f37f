import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { closeSync, constants, mkdtempSync, openSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { migrate } from '../../src/store/schema/migrate.js'
import { cleanEnv, freePort, ROOT } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'

/**
 * A log reader that stops reading (a container runtime's log driver that blocks, a full pipe) or
 * goes away (a broken pipe): requests are answered all the same, and the server still stops when
 * told to (src/log-destination.ts; its buffer's bound: test/unit/log-destination.test.ts). A
 * synchronous write per line stopped the server at the pipe's first 64 KB; pino's own destination
 * stopped it at exit, retrying forever the write to a reader that had gone.
 */
describe.skipIf(!postgresAvailable())('the server beside a log reader that fails', () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createTestDatabase()
    const store = createPostgresStore({ connectionString: database.url })
    await migrate(store)
    await store.close()
  }, patience(60_000))
  afterAll(async () => {
    await database?.drop()
  })

  async function serve(stdout: number | 'pipe'): Promise<{ child: ChildProcess; url: string }> {
    const port = await freePort()
    const child = spawn('node', ['dist/server.js'], {
      cwd: ROOT,
      env: cleanEnv({ DATABASE_URL: database.url, PORT: String(port), LOG_LEVEL: 'info' }),
      stdio: ['ignore', stdout, 'pipe'],
    })
    const url = `http://127.0.0.1:${port}/api/public/v1/customers`
    for (let tries = 0; ; tries++) {
      const answer = await fetch(url).catch(() => undefined)
      if (answer?.status === 401) return { child, url }
      if (tries > 300 || child.exitCode !== null) throw new Error('the server did not start')
      await sleep(100)
    }
  }

  /** `requests` requests, 50 at a time, each given 5 s: their statuses. */
  async function load(url: string, requests: number): Promise<number[]> {
    const statuses: number[] = []
    for (let at = 0; at < requests; at += 50) {
      const batch = await Promise.all(
        Array.from({ length: 50 }, () =>
          fetch(url, { signal: AbortSignal.timeout(5_000) }).then((answer) => answer.status),
        ),
      )
      statuses.push(...batch)
    }
    return statuses
  }

  /** SIGTERM, then its exit code, or `'still running'` after `ms`. */
  async function stopWithin(child: ChildProcess, ms: number): Promise<number | null | 'still running'> {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    const outcome = await Promise.race([exited, sleep(ms).then(() => 'still running' as const)])
    if (outcome === 'still running') {
      child.kill('SIGKILL')
      await exited
    }
    return outcome
  }

  it(
    'answers every request while nothing reads its standard output, and stops when told to',
    async () => {
      // A FIFO whose reading end this test holds open and never reads: it fills at 64 KB.
      const dir = mkdtempSync(join(tmpdir(), 'openbook-log-'))
      const fifo = join(dir, 'stdout')
      execFileSync('mkfifo', [fifo])
      const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK)
      const writer = openSync(fifo, constants.O_WRONLY)
      try {
        const { child, url } = await serve(writer)
        closeSync(writer)
        // Each request writes a line of about 200 bytes: 3,000 are ten times the pipe's buffer.
        const statuses = await load(url, 3_000)
        expect(statuses.filter((status) => status === 401)).toHaveLength(3_000)
        // Its drain, then at most 2 s for the lines left, then exit.
        expect(await stopWithin(child, 20_000)).toBe(0)
      } finally {
        closeSync(reader)
        rmSync(dir, { recursive: true, force: true })
      }
    },
    patience(120_000),
  )

  it(
    'answers every request after its log reader has gone, says so once on stderr, and stops when told to',
    async () => {
      const { child, url } = await serve('pipe')
      let stderr = ''
      child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk
      })
      // The reading end closed: every write to standard output fails with EPIPE from now on.
      child.stdout?.destroy()
      const statuses = await load(url, 500)
      expect(statuses.filter((status) => status === 401)).toHaveLength(500)
      expect(await stopWithin(child, 20_000)).toBe(0)
      expect(stderr.match(/the log's output failed \(EPIPE\)/g)).toHaveLength(1)
    },
    patience(120_000),
  )
})
