import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase, urlOf } from './helpers/postgres.js'
import { startServer, type TestServer } from './helpers/server.js'
import { closedPort, faultyProxy, type Run, sync } from './helpers/sync.js'

/**
 * Each row of openbook-sync's exit-code table (README), as a scheduler meets it: 0 done, 1 retry
 * later (only what a rerun can cure), 2 fix the command (an option, a schema that does not exist, a
 * table of the wrong shape, a file that cannot be written), 3 fix the key, 4 another run holds the
 * state. With --json, a summary on standard output whatever the outcome.
 */

let server: TestServer
let directory: string
let database: TestDatabase
let db: pg.Client

beforeAll(async () => {
  server = await startServer()
  directory = mkdtempSync(join(tmpdir(), 'openbook-exit-'))
  if (!hasPostgres) return
  database = await createDatabase('openbook_exit')
  db = new pg.Client({ connectionString: database.url })
  await db.connect()
}, patience(180_000))

afterAll(async () => {
  await db?.end().catch(() => {})
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await database?.drop()
})

let n = 0
const run = (args: readonly string[], baseUrl = server.baseUrl, key = server.key) =>
  sync(['customers', '--key-env', 'KEY', '--base-url', baseUrl, '--json', ...args], {
    cwd: directory,
    env: { KEY: key },
  })
const out = () => join(directory, `out-${++n}.ndjson`)

/** The exit code, the one line on standard error that says why, and the JSON summary. */
function outcome(result: Run): { code: number | null; why: string; summary: Record<string, unknown> } {
  const lines = result.stderr.trim().split('\n')
  return {
    code: result.code,
    why: lines.at(-1) ?? '',
    summary: JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}'),
  }
}

describe('openbook-sync exit codes', () => {
  it('0: the pass completed (and a JSON summary)', async () => {
    const { code, summary } = outcome(await run(['--out', out()]).done)
    expect(code).toBe(0)
    expect(summary).toMatchObject({ complete: true, orgId: 'org_demo' })
  })

  it('1: the server stays unreachable beyond the retries, with a line for each retry', async () => {
    const port = await closedPort()
    const result = await run(['--out', out(), '--max-elapsed', '2s'], `http://127.0.0.1:${port}`).done
    const { code, why, summary } = outcome(result)
    expect(code).toBe(1)
    expect(why).toContain('rerun to resume')
    expect(result.stderr).toMatch(/attempt 1 failed \(network_error\): attempt 2 in \d+\.\ds/)
    expect(summary).toMatchObject({ complete: false, exitCode: 1, error: { code: 'network_error' } })
    expect(Number(summary.retries)).toBeGreaterThan(0)
  })

  it('1: a 5xx ridden out is said, one line a retry, and the run completes', async () => {
    const proxy = await faultyProxy(server.baseUrl, ['5xx', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok'])
    try {
      const result = await run(['--out', out()], proxy.url).done
      expect(result.code, result.stderr).toBe(0)
      expect(result.stderr).toMatch(/attempt 1 failed \(HTTP 502\): attempt 2 in/)
      expect(JSON.parse(result.stdout).retries).toBeGreaterThan(0)
    } finally {
      await proxy.close()
    }
  })

  it('2: a wrong option', async () => {
    const { code, why, summary } = outcome(await run(['--out', out(), '--page-size', '1']).done)
    expect(code).toBe(2)
    expect(why).toContain('--page-size must be from 2 to 100')
    expect(summary).toMatchObject({ exitCode: 2, complete: false })
  })

  it('2: a file that cannot be written', async () => {
    const blocker = join(directory, 'not-a-directory')
    writeFileSync(blocker, '')
    const { code, why } = outcome(await run(['--out', join(blocker, 'customers.ndjson')]).done)
    expect(code).toBe(2)
    expect(why).toMatch(/ENOTDIR|EEXIST|not a directory/i)
  })

  it("2: a CSV file whose header is not this version's columns, left as it was", async () => {
    const path = join(directory, 'older.csv')
    const older = 'id,firstName,createdAt\r\ncus_1,Ada,2026-01-01T00:00:00.000Z\r\n'
    writeFileSync(path, older)
    const { code, why } = outcome(await run(['--out', path]).done)
    expect(code).toBe(2)
    expect(why).toContain('has another header than this version')
    expect(why).toContain('Start a new file')
    expect(readFileSync(path, 'utf8')).toBe(older)
  })

  it('3: the key is refused', async () => {
    const unknown = server.key.replace(/[0-9a-f]{64}$/, '0'.repeat(64))
    const { code, why, summary } = outcome(await run(['--out', out()], server.baseUrl, unknown).done)
    expect(code).toBe(3)
    expect(why).toContain('check the key')
    expect(summary).toMatchObject({ exitCode: 3, error: { name: 'AuthenticationError', status: 401 } })
  })

  it(
    '4: another run holds the state; it did nothing',
    async () => {
      const proxy = await faultyProxy(server.baseUrl, ['ok'], 400)
      const path = out()
      try {
        const first = run(['--out', path, '--page-size', '50'], proxy.url)
        await new Promise((resolve) => setTimeout(resolve, 1_000))
        const second = outcome(await run(['--out', path]).done)
        expect(second.code).toBe(4)
        expect(second.why).toContain('another openbook-sync')
        expect(second.summary).toMatchObject({ exitCode: 4 })
        const done = await first.done
        expect(done.code, done.stderr).toBe(0)
        expect(JSON.parse(done.stdout)).toMatchObject({ complete: true, pass: 1 })
        // Once the first has ended, the next run goes on.
        expect((await run(['--out', path]).done).code).toBe(0)
      } finally {
        await proxy.close()
      }
    },
    patience(120_000),
  )

  describe.skipIf(!hasPostgres)('--pg', () => {
    it('2: a table in a schema that does not exist', async () => {
      const { code, why } = outcome(await run(['--pg', database.url, '--table', 'sync.customers']).done)
      expect(code).toBe(2)
      expect(why).toContain('schema "sync" does not exist')
      expect(why).not.toContain('rerun')
    })

    it('2: a table of the wrong shape', async () => {
      await db.query('create table wrong_shape (org_id text, id text, data text, primary key (org_id, id))')
      const { code, why } = outcome(await run(['--pg', database.url, '--table', 'wrong_shape']).done)
      expect(code).toBe(2)
      expect(why).toContain('table wrong_shape is not an openbook-sync table')
      expect(why).toContain('data jsonb (it is text)')
    })

    it('2: PostgreSQL refuses the connection (no such database)', async () => {
      const { code } = outcome(await run(['--pg', urlOf('no_such_database_here')]).done)
      expect(code).toBe(2)
    })

    it('1: PostgreSQL unreachable beyond the retries, one line a retry in its words', async () => {
      const port = await closedPort()
      const result = await run(['--pg', `postgres://root@127.0.0.1:${port}/x`, '--max-elapsed', '2s']).done
      const { code, why } = outcome(result)
      expect(code).toBe(1)
      expect(why).toContain('rerun to resume')
      expect(result.stderr).toMatch(
        /attempt 1 failed \(PostgreSQL: connect ECONNREFUSED [^)]*\): attempt 2 in/,
      )
    })
  })
})
