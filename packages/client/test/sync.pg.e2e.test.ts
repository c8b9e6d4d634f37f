import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { Openbook } from '../src/index.js'
import { startServer, type TestServer } from './helpers/server.js'

declare module 'vitest' {
  export interface ProvidedContext {
    /** Set by the root's test/helpers/global-setup.ts: null when PostgreSQL is unreachable. */
    postgresUrl: string | null
  }
}

const BIN = new URL('../bin/openbook-sync.js', import.meta.url).pathname
const ADMIN_URL =
  inject('postgresUrl') ?? process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'
const hasPostgres = inject('postgresUrl') !== null

let server: TestServer
let directory: string
let keyFile: string
let database: string
let databaseUrl: string
let db: pg.Client

function urlOf(name: string): string {
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  return url.toString()
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

beforeAll(async () => {
  if (!hasPostgres) return
  database = `openbook_sync_${randomBytes(4).toString('hex')}`
  await admin((client) => client.query(`create database ${database}`))
  databaseUrl = urlOf(database)
  db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  server = await startServer()
  directory = mkdtempSync(join(tmpdir(), 'openbook-sync-pg-'))
  keyFile = join(directory, 'key')
  writeFileSync(keyFile, `${server.key}\n`)
  // An integrator's project with the client installed (linked, as npm links a workspace), for npx.
  writeFileSync(join(directory, 'package.json'), '{ "name": "my-integration", "private": true }\n')
  mkdirSync(join(directory, 'node_modules/@openbook'), { recursive: true })
  mkdirSync(join(directory, 'node_modules/.bin'))
  symlinkSync(
    fileURLToPath(new URL('../', import.meta.url)),
    join(directory, 'node_modules/@openbook/client'),
  )
  symlinkSync('../@openbook/client/bin/openbook-sync.js', join(directory, 'node_modules/.bin/openbook-sync'))
}, 180_000)

afterAll(async () => {
  await db?.end().catch(() => {})
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  if (database) await admin((client) => client.query(`drop database if exists ${database} with (force)`))
})

/** A proxy that answers every request after `delayMs`, to make a pass slow enough to kill. */
async function slowProxy(target: string, delayMs: number) {
  const proxy: Server = createServer(async (request, response) => {
    await new Promise((resolve) => setTimeout(resolve, delayMs))
    try {
      const upstream = await fetch(new URL(request.url ?? '/', target), {
        headers: { authorization: request.headers.authorization ?? '' },
      })
      const body = Buffer.from(await upstream.arrayBuffer())
      response.writeHead(upstream.status, { 'content-type': 'application/json' })
      response.end(body)
    } catch {
      request.socket.destroy()
    }
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  const { port } = proxy.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections()
        proxy.close(() => resolve())
      }),
  }
}

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function sync(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): { child: ChildProcess; done: Promise<Run> } {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: directory,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const done = new Promise<Run>((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })))
  return { child, done }
}

async function activeIds(resource: 'customers' | 'appointments', window = {}): Promise<string[]> {
  const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
  const rows = resource === 'customers' ? openbook.customers.all() : openbook.appointments.all(window)
  const ids: string[] = []
  for await (const row of rows) ids.push(row.id)
  return ids
}

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

/** Deactivates `count` customers from `offset` through `openbook import`; returns their ids. */
async function deactivate(offset: number, count: number): Promise<string[]> {
  const gone = (
    await new Openbook({ apiKey: server.key, baseUrl: server.baseUrl }).customers.list({
      offset,
      limit: count,
    })
  ).data
  await server.importLines(
    gone.map((c) => ({
      type: 'customer',
      id: c.id,
      orgId: 'org_demo',
      isActive: false,
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
    })),
  )
  return gone.map((c) => c.id)
}

describe.skipIf(!hasPostgres)('openbook-sync --pg', () => {
  it('creates openbook_customers, upserts every customer, and marks deactivated ones on the next complete pass', async () => {
    const args = [
      'customers',
      '--key-file',
      keyFile,
      '--base-url',
      server.baseUrl,
      '--pg',
      databaseUrl,
      '--json',
    ]
    const first = await sync(args).done
    expect(first.code, first.stderr).toBe(0)
    const expected = await activeIds('customers')
    expect(JSON.parse(first.stdout)).toMatchObject({
      resource: 'customers',
      format: 'pg',
      out: 'openbook_customers',
      pass: 1,
      complete: true,
      rows: expected.length,
      tombstones: 0,
    })
    const rows = await table('openbook_customers')
    expect(rows.map((row) => row.id)).toEqual(sorted(expected))
    expect(rows.every((row) => row.deleted_at === null && row.sync_pass === 1)).toBe(true)
    const sample = rows[0]
    expect(sample?.data).toMatchObject({ id: sample?.id, isActive: true })
    expect(first.stderr + first.stdout).not.toContain(server.key)
    expect(existsSync(join(directory, `openbook-sync.${database}.openbook_customers.state.json`))).toBe(true)

    const gone = await deactivate(20, 3)
    const second = await sync(args).done
    expect(second.code, second.stderr).toBe(0)
    expect(JSON.parse(second.stdout)).toMatchObject({
      pass: 2,
      complete: true,
      resumed: false,
      tombstones: 3,
    })
    const after = await table('openbook_customers')
    expect(after.length).toBe(rows.length)
    expect(sorted(after.filter((row) => row.deleted_at !== null).map((row) => row.id))).toEqual(sorted(gone))
    expect(sorted(after.filter((row) => row.deleted_at === null).map((row) => row.id))).toEqual(
      sorted(await activeIds('customers')),
    )

    // A third pass marks nothing new and keeps the marks.
    const third = await sync(args).done
    expect(JSON.parse(third.stdout)).toMatchObject({ pass: 3, complete: true, tombstones: 0 })
    expect((await table('openbook_customers')).filter((row) => row.deleted_at !== null).length).toBe(3)
  }, 120_000)

  it('syncs appointments in a window into a table named with --table', async () => {
    const window = { startDate: '2025-01-01T00:00:00Z', endDate: '2026-06-30T23:59:59Z' }
    const run = await sync(
      [
        'appointments',
        '--key-env',
        'OB_KEY',
        '--base-url',
        server.baseUrl,
        '--pg',
        databaseUrl,
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
    const expected = await activeIds('appointments', window)
    expect(expected.length).toBeGreaterThan(0)
    const rows = await table('crm_appointments')
    expect(rows.map((row) => row.id)).toEqual(sorted(expected))
    expect(rows[0]?.data).toHaveProperty('start')
  }, 60_000)

  it('resumes after kill -9 with no duplicate and no gap; deleted_at only after a complete pass', async () => {
    const name = 'resume_customers'
    const state = join(directory, 'resume.state.json')
    const args = ['customers', '--key-file', keyFile, '--pg', databaseUrl, '--table', name, '--state', state]
    const first = await sync([...args, '--base-url', server.baseUrl, '--json']).done
    expect(first.code, first.stderr).toBe(0)

    const gone = await deactivate(100, 2)
    const slow = await slowProxy(server.baseUrl, 60)
    try {
      const { child, done } = sync([...args, '--base-url', slow.url, '--page-size', '10'])
      let exited = false
      void done.then(() => {
        exited = true
      })
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, 50))
        if (exited) throw new Error(`the sync ended before it could be killed: ${(await done).stderr}`)
        const saved = existsSync(state) ? JSON.parse(readFileSync(state, 'utf8')) : undefined
        if ((saved?.current?.rows ?? 0) >= 60) break
      }
      child.kill('SIGKILL')
      expect((await done).code).toBe(null)
    } finally {
      await slow.close()
    }
    // Killed mid-pass: some rows carry pass 2, none is marked deleted.
    const killed = await table(name)
    expect(killed.some((row) => row.sync_pass === 2)).toBe(true)
    expect(killed.some((row) => row.sync_pass === 1)).toBe(true)
    expect(killed.filter((row) => row.deleted_at !== null)).toEqual([])

    const rerun = await sync([...args, '--base-url', server.baseUrl, '--page-size', '10', '--json']).done
    expect(rerun.code, rerun.stderr).toBe(0)
    const expected = await activeIds('customers')
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
    expect(sorted(rows.filter((row) => row.sync_pass === 2).map((row) => row.id))).toEqual(sorted(expected))
    expect(sorted(rows.filter((row) => row.deleted_at !== null).map((row) => row.id))).toEqual(sorted(gone))
    expect(rows.filter((row) => row.deleted_at === null).length).toBe(expected.length)
  }, 120_000)

  it('exits 2 on usage errors and when PostgreSQL refuses, 1 when it is unreachable', async () => {
    const base = ['customers', '--key-file', keyFile, '--base-url', server.baseUrl]
    const both = await sync([...base, '--pg', databaseUrl, '--out', join(directory, 'x.ndjson')]).done
    expect(both.code).toBe(2)
    expect(both.stderr).toContain('not both')
    const badTable = await sync([...base, '--pg', databaseUrl, '--table', 'x; drop table y']).done
    expect(badTable.code).toBe(2)
    expect(badTable.stderr).toContain('--table must be')
    const notUrl = await sync([...base, '--pg', 'mysql://localhost/crm']).done
    expect(notUrl.code).toBe(2)
    expect(notUrl.stderr).toContain('--pg must be a postgres://')
    // The package installed where there is no pg: a clear message, exit 2.
    const alone = mkdtempSync(join(tmpdir(), 'openbook-sync-no-pg-'))
    try {
      for (const part of ['dist', 'bin', 'package.json'])
        cpSync(fileURLToPath(new URL(`../${part}`, import.meta.url)), join(alone, part), { recursive: true })
      const withoutPg = await new Promise<Run>((resolve) => {
        const child = spawn(
          process.execPath,
          [join(alone, 'bin/openbook-sync.js'), ...base, '--pg', databaseUrl],
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
    const noDatabase = await sync([...base, '--pg', urlOf(`${database}_missing`)]).done
    expect(noDatabase.code).toBe(2)
    expect(noDatabase.stderr).toContain('does not exist')
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo
        probe.close(() => resolve(port))
      })
    })
    const down = await sync([...base, '--pg', `postgres://root@127.0.0.1:${closed}/x`]).done
    expect(down.code).toBe(1)
    expect(down.stderr).toMatch(/ECONNREFUSED.*rerun to resume/)
  }, 60_000)
})

describe.skipIf(!hasPostgres)('README --pg example', () => {
  it('runs as printed (the demo address and the database URL replaced), and its view works', async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
    const blocks = (language: string) =>
      [...readme.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1] ?? '')
    const commands = blocks('sh').find((block) => block.includes('--pg'))
    const view = blocks('sql').find((block) => block.includes('openbook_customers'))
    if (!commands || !view) throw new Error('no --pg example in the README')
    // Its own database, so that the default table names start empty.
    const name = `${database}_readme`
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
      expect(rows.length).toBe((await activeIds('customers')).length)
      expect(rows[0]).toMatchObject({ id: expect.any(String), name: expect.any(String) })
    } finally {
      await readmeDb.end().catch(() => {})
      await admin((client) => client.query(`drop database if exists ${name} with (force)`))
    }
  }, 120_000)
})
