import { execFileSync, spawn } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ClientEvent } from '../src/index.js'
import { runPgSync, SyncTargetError } from '../src/sync/index.js'
import { patience } from './helpers/patience.js'
import {
  ADMIN_URL,
  admin,
  createDatabase,
  hasPostgres,
  type TestDatabase,
  urlOf,
} from './helpers/postgres.js'
import { startServer, type TestServer } from './helpers/server.js'
import {
  activeIds,
  closedPort,
  codeBlocks,
  deactivateCustomers,
  faultyProxy,
  integratorProject,
  killAfterRows,
  type Run,
  sync,
} from './helpers/sync.js'

let server: TestServer
let directory: string
let keyFile: string
let database: TestDatabase
let db: pg.Client

beforeAll(async () => {
  if (!hasPostgres) return
  database = await createDatabase('openbook_sync')
  db = new pg.Client({ connectionString: database.url })
  await db.connect()
  server = await startServer()
  directory = integratorProject('openbook-sync-pg-')
  keyFile = join(directory, 'key')
  writeFileSync(keyFile, `${server.key}\n`)
}, patience(180_000))

afterAll(async () => {
  await db?.end().catch(() => {})
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await database?.drop()
})

/** openbook-sync in the integrator's project, where its default state files go. */
const runSync = (args: readonly string[], env: NodeJS.ProcessEnv = {}) => sync(args, { cwd: directory, env })

interface TableRow {
  id: string
  data: Record<string, unknown>
  deleted_at: Date | null
  sync_pass: number
}

async function table(name: string): Promise<TableRow[]> {
  return (await db.query<TableRow>(`select id, data, deleted_at, sync_pass from "${name}" order by id`)).rows
}

const sorted = (ids: readonly string[]) => [...ids].sort()

describe.skipIf(!hasPostgres)('openbook-sync --pg', () => {
  it(
    'creates openbook_customers_<org>, upserts every customer, and marks deactivated ones on the next complete pass',
    async () => {
      const args = [
        'customers',
        '--key-file',
        keyFile,
        '--base-url',
        server.baseUrl,
        '--pg',
        database.url,
        '--json',
      ]
      const first = await runSync(args).done
      expect(first.code, first.stderr).toBe(0)
      const expected = await activeIds(server, 'customers')
      expect(JSON.parse(first.stdout)).toMatchObject({
        resource: 'customers',
        format: 'pg',
        orgId: 'org_demo',
        out: 'openbook_customers_org_demo',
        pass: 1,
        complete: true,
        rows: expected.length,
        tombstones: 0,
      })
      const rows = await table('openbook_customers_org_demo')
      expect(rows.map((row) => row.id)).toEqual(sorted(expected))
      expect(rows.every((row) => row.deleted_at === null && row.sync_pass === 1)).toBe(true)
      const sample = rows[0]
      expect(sample?.data).toMatchObject({ id: sample?.id, isActive: true })
      expect(first.stderr + first.stdout).not.toContain(server.key)
      expect(
        existsSync(join(directory, `openbook-sync.${database.name}.openbook_customers_org_demo.state.json`)),
      ).toBe(true)

      const gone = await deactivateCustomers(server, 20, 3)
      const second = await runSync(args).done
      expect(second.code, second.stderr).toBe(0)
      expect(JSON.parse(second.stdout)).toMatchObject({
        pass: 2,
        complete: true,
        resumed: false,
        tombstones: 3,
      })
      const after = await table('openbook_customers_org_demo')
      expect(after.length).toBe(rows.length)
      expect(sorted(after.filter((row) => row.deleted_at !== null).map((row) => row.id))).toEqual(
        sorted(gone),
      )
      expect(sorted(after.filter((row) => row.deleted_at === null).map((row) => row.id))).toEqual(
        sorted(await activeIds(server, 'customers')),
      )

      // A third run finds nothing changed since the second pass began: no pass (the organization's
      // look-up, which names the default table, and one request answered 304), the marks kept.
      const third = await runSync(args).done
      expect(JSON.parse(third.stdout)).toMatchObject({
        pass: 2,
        complete: true,
        unchanged: true,
        requests: 2,
      })
      // With another page size it is a whole pass, which marks nothing new.
      const fourth = await runSync([...args, '--page-size', '50']).done
      expect(JSON.parse(fourth.stdout)).toMatchObject({
        pass: 3,
        complete: true,
        unchanged: false,
        tombstones: 0,
      })
      expect(
        (await table('openbook_customers_org_demo')).filter((row) => row.deleted_at !== null).length,
      ).toBe(3)
    },
    patience(120_000),
  )

  it(
    'syncs appointments in a window into a table named with --table',
    async () => {
      const window = { startDate: '2025-01-01T00:00:00Z', endDate: '2026-06-30T23:59:59Z' }
      const run = await runSync(
        [
          'appointments',
          '--key-env',
          'OB_KEY',
          '--base-url',
          server.baseUrl,
          '--pg',
          database.url,
          '--table',
          'crm_appointments',
          '--since',
          window.startDate,
          '--until',
          window.endDate,
          '--json',
        ],
        { OB_KEY: server.key },
      ).done
      expect(run.code, run.stderr).toBe(0)
      const expected = await activeIds(server, 'appointments', window)
      expect(expected.length).toBeGreaterThan(0)
      const rows = await table('crm_appointments')
      expect(rows.map((row) => row.id)).toEqual(sorted(expected))
      expect(rows[0]?.data).toHaveProperty('start')
    },
    patience(60_000),
  )

  it(
    'resumes after kill -9 with no duplicate and no gap; deleted_at only after a complete pass',
    async () => {
      const name = 'resume_customers'
      const state = join(directory, 'resume.state.json')
      const args = [
        'customers',
        '--key-file',
        keyFile,
        '--pg',
        database.url,
        '--table',
        name,
        '--state',
        state,
        '--checkpoint-pages',
        '3',
      ]
      const first = await runSync([...args, '--base-url', server.baseUrl, '--json']).done
      expect(first.code, first.stderr).toBe(0)

      const gone = await deactivateCustomers(server, 100, 2)
      const slow = await faultyProxy(server.baseUrl, ['ok'], 60)
      try {
        await killAfterRows(runSync([...args, '--base-url', slow.url, '--page-size', '10']), state, 60)
      } finally {
        await slow.close()
      }
      // Killed mid-pass: pass 2's seen-set holds some rows (unchanged rows are not written again,
      // so they keep pass 1), none is marked deleted.
      const killed = await table(name)
      expect(readFileSync(`${state}.pass-2.ids`, 'utf8').split('\n').filter(Boolean).length).toBeGreaterThan(
        0,
      )
      expect(killed.every((row) => row.sync_pass === 1)).toBe(true)
      expect(killed.filter((row) => row.deleted_at !== null)).toEqual([])

      const rerun = await runSync([...args, '--base-url', server.baseUrl, '--page-size', '10', '--json']).done
      expect(rerun.code, rerun.stderr).toBe(0)
      const expected = await activeIds(server, 'customers')
      expect(JSON.parse(rerun.stdout)).toMatchObject({
        pass: 2,
        resumed: true,
        complete: true,
        tombstones: 2,
        rows: expected.length,
      })
      const rows = await table(name)
      // No gap: every active customer was seen by pass 2; no duplicate: one row per id.
      expect(new Set(rows.map((row) => row.id)).size).toBe(rows.length)
      expect(sorted(rows.filter((row) => row.deleted_at === null).map((row) => row.id))).toEqual(
        sorted(expected),
      )
      expect(sorted(rows.filter((row) => row.deleted_at !== null).map((row) => row.id))).toEqual(sorted(gone))
      expect(rows.filter((row) => row.deleted_at === null).length).toBe(expected.length)
    },
    patience(120_000),
  )

  it(
    'exits 2 on usage errors and when PostgreSQL refuses, 1 when it is unreachable',
    async () => {
      const base = ['customers', '--key-file', keyFile, '--base-url', server.baseUrl]
      const both = await runSync([...base, '--pg', database.url, '--out', join(directory, 'x.ndjson')]).done
      expect(both.code).toBe(2)
      expect(both.stderr).toContain('not both')
      const badTable = await runSync([...base, '--pg', database.url, '--table', 'x; drop table y']).done
      expect(badTable.code).toBe(2)
      expect(badTable.stderr).toContain('--table must be')
      const notUrl = await runSync([...base, '--pg', 'mysql://localhost/crm']).done
      expect(notUrl.code).toBe(2)
      expect(notUrl.stderr).toContain('--pg must be a postgres://')
      // The package installed where there is no pg: a clear message, exit 2.
      const alone = mkdtempSync(join(tmpdir(), 'openbook-sync-no-pg-'))
      try {
        for (const part of ['dist', 'bin', 'package.json'])
          cpSync(fileURLToPath(new URL(`../${part}`, import.meta.url)), join(alone, part), {
            recursive: true,
          })
        const withoutPg = await new Promise<Run>((resolve) => {
          const child = spawn(
            process.execPath,
            [join(alone, 'bin/openbook-sync.js'), ...base, '--pg', database.url],
            { cwd: alone, stdio: ['ignore', 'pipe', 'pipe'] },
          )
          let stderr = ''
          child.stderr.on('data', (chunk: Buffer) => {
            stderr += chunk.toString()
          })
          child.once('exit', (code) => resolve({ code, stdout: '', stderr }))
        })
        expect(withoutPg.code).toBe(2)
        expect(withoutPg.stderr).toContain('npm install pg')
      } finally {
        rmSync(alone, { recursive: true, force: true })
      }
      const noDatabase = await runSync([...base, '--pg', urlOf(`${database.name}_missing`)]).done
      expect(noDatabase.code).toBe(2)
      expect(noDatabase.stderr).toContain('does not exist')
      const closed = await closedPort()
      const down = await runSync([
        ...base,
        '--pg',
        `postgres://root@127.0.0.1:${closed}/x`,
        '--max-attempts',
        '1',
      ]).done
      expect(down.code).toBe(1)
      expect(down.stderr).toMatch(/ECONNREFUSED.*rerun to resume/)
    },
    patience(60_000),
  )
})

describe.skipIf(!hasPostgres)('openbook-sync --pg, a warehouse blip', () => {
  it(
    "rides out its connection terminated mid-pass: retried in PostgreSQL's words, resumed, every row once",
    async () => {
      const table = 'crm_blip'
      const events: ClientEvent[] = []
      let terminated = 0
      const summary = await runPgSync({
        resource: 'customers',
        apiKey: server.key,
        baseUrl: server.baseUrl,
        pg: database.url,
        table,
        statePath: join(directory, 'blip.state.json'),
        pageSize: 20,
        checkpointPages: 3,
        onClientEvent: (event) => events.push(event),
        onProgress: ({ rows }) => {
          if (rows < 100 || terminated > 0) return
          // The warehouse restarts under the pass: its session ends in the middle of a transaction,
          // before the next page (psql, synchronously).
          const killed = execFileSync(
            'psql',
            [
              ADMIN_URL,
              '-Atc',
              `select count(pg_terminate_backend(pid)) from pg_stat_activity
               where application_name = 'openbook-sync' and datname = '${database.name}'`,
            ],
            { encoding: 'utf8' },
          )
          terminated = Number(killed.trim())
        },
      })
      expect(terminated).toBe(1)
      const retries = events.filter((event) => event.type === 'retry' && event.url === 'postgresql:')
      expect(retries.length).toBeGreaterThanOrEqual(1)
      expect(retries[0]).toMatchObject({
        attempt: 1,
        // The server's words when its message arrived before the next query, else the driver's.
        reason: expect.stringMatching(
          /^PostgreSQL: (terminating connection due to administrator command \(57P01\)|Connection terminated unexpectedly)$/,
        ),
      })
      expect(summary).toMatchObject({ complete: true, tombstones: 0 })
      expect(summary.retries).toBeGreaterThanOrEqual(retries.length)
      const rows = await db.query<{ id: string }>(`select id from ${table} order by id`)
      expect(rows.rows.map((row) => row.id)).toEqual([...(await activeIds(server, 'customers'))].sort())
    },
    patience(120_000),
  )

  it('fails at once on what does not pass by itself, and after --max-attempts on what does', async () => {
    const closed = await closedPort()
    const started = Date.now()
    const events: ClientEvent[] = []
    const failure = await runPgSync({
      resource: 'customers',
      apiKey: server.key,
      baseUrl: server.baseUrl,
      pg: `postgres://root@127.0.0.1:${closed}/x`,
      statePath: join(directory, 'down.state.json'),
      maxAttempts: 3,
      onClientEvent: (event) => events.push(event),
    }).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(SyncTargetError)
    expect(events.filter((event) => event.type === 'retry').map((event) => event.attempt)).toEqual([1, 2])
    expect(Date.now() - started).toBeLessThan(10_000)
  })
})

describe.skipIf(!hasPostgres)('README --pg example', () => {
  it(
    'runs as printed (the demo address and the database URL replaced), and its view works',
    async () => {
      const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
      const commands = codeBlocks(readme, 'sh').find((block) => block.includes('--pg'))
      const view = codeBlocks(readme, 'sql').find((block) => block.includes('openbook_customers_org_demo'))
      if (!commands || !view) throw new Error('no --pg example in the README')
      // Its own database, so that the default table names start empty.
      const name = `${database.name}_readme`
      await admin((client) => client.query(`create database ${name}`))
      const readmeDb = new pg.Client({ connectionString: urlOf(name) })
      try {
        const script = commands
          .replaceAll('http://127.0.0.1:3000', server.baseUrl)
          .replaceAll('postgres://localhost/crm', urlOf(name))
        const out = execFileSync('sh', ['-e', '-c', script], {
          cwd: directory,
          env: { ...process.env, OPENBOOK_KEY: server.key },
          encoding: 'utf8',
        })
        expect(JSON.parse(out.trim().split('\n').at(-1) ?? '{}')).toMatchObject({
          resource: 'appointments',
          out: 'openbook_appointments_2026',
          complete: true,
        })
        await readmeDb.connect()
        await readmeDb.query(view)
        const { rows } = await readmeDb.query('select * from crm_customers')
        expect(rows.length).toBe((await activeIds(server, 'customers')).length)
        expect(rows[0]).toMatchObject({ id: expect.any(String), name: expect.any(String) })
      } finally {
        await readmeDb.end().catch(() => {})
        await admin((client) => client.query(`drop database if exists ${name} with (force)`))
      }
    },
    patience(120_000),
  )
})
