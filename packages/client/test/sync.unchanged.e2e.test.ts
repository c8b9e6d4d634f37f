import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import { startServer, type TestServer } from './helpers/server.js'
import { deactivateCustomers, sync } from './helpers/sync.js'

/**
 * Conditional pages against a real server (embedded store, the demo organization): the client's
 * `ifNoneMatch`, and openbook-sync skipping a pass when the list has not changed since the last
 * complete one began (one request), but never when it changed or the window moved.
 */

let server: TestServer
let directory: string
let keyFile: string

beforeAll(async () => {
  server = await startServer()
  directory = mkdtempSync(join(tmpdir(), 'openbook-sync-unchanged-'))
  keyFile = join(directory, 'key')
  writeFileSync(keyFile, `${server.key}\n`, { mode: 0o600 })
}, 180_000)

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

const run = async (args: readonly string[]) => {
  const done = await sync([...args, '--key-file', keyFile, '--base-url', server.baseUrl, '--json']).done
  expect(done.code, done.stderr).toBe(0)
  return JSON.parse(done.stdout) as Record<string, unknown>
}

describe('conditional pages in the client', () => {
  it('list() with a page’s etag is answered NotModified, and a page again once the list changed', async () => {
    const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
    const page = await openbook.customers.list({ limit: 5 })
    expect(page.etag).toMatch(/^"\d+-[A-Za-z0-9_-]{22}"$/)
    const again = await openbook.customers.list({ limit: 5 }, { ifNoneMatch: String(page.etag) })
    expect(again).toMatchObject({ notModified: true, etag: page.etag })
    // Another query of the same list: its own page.
    const other = await openbook.customers.list({ limit: 6 }, { ifNoneMatch: String(page.etag) })
    expect(other.notModified).not.toBe(true)
    expect(other.notModified ? [] : other.data).toHaveLength(6)
  })

  it('all() with the etag of an earlier iteration makes one request when nothing changed', async () => {
    const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
    const first = openbook.appointments.all({ status: 'completed' }, { pageSize: 40 })
    const rows = await first.toArray()
    expect(rows.length).toBeGreaterThan(40)
    expect(first.etag).toBeDefined()
    const second = openbook.appointments.all(
      { status: 'completed' },
      { pageSize: 40, ifNoneMatch: first.etag },
    )
    expect(await second.toArray()).toEqual([])
    expect(second.notModified).toBe(true)
    expect(second.stats.requests).toBe(1)
  })
})

describe('openbook-sync on an unchanged organization', () => {
  it('skips the pass at the cost of one request, and reads again once anything changed', async () => {
    const out = join(directory, 'customers.ndjson')
    const first = await run(['customers', '--out', out])
    expect(first).toMatchObject({ complete: true, unchanged: false, pass: 1 })
    expect(first.rows).toBeGreaterThan(100)
    const copy = readFileSync(out, 'utf8')
    const state = readFileSync(`${out}.state.json`, 'utf8')
    expect(JSON.parse(state).validator).toMatchObject({ pageSize: 100 })

    const second = await run(['customers', '--out', out])
    expect(second).toMatchObject({ complete: true, unchanged: true, pass: 1, rows: 0, requests: 1 })
    expect(readFileSync(out, 'utf8')).toBe(copy)
    expect(readFileSync(`${out}.state.json`, 'utf8')).toBe(state)

    // Another page size is another query: a pass.
    const other = await run(['customers', '--out', out, '--page-size', '50'])
    expect(other).toMatchObject({ complete: true, unchanged: false, pass: 2, tombstones: 0 })
    expect(await run(['customers', '--out', out, '--page-size', '50'])).toMatchObject({ unchanged: true })

    const [gone] = await deactivateCustomers(server, 10, 1)
    const third = await run(['customers', '--out', out, '--page-size', '50'])
    expect(third).toMatchObject({ complete: true, unchanged: false, pass: 3, tombstones: 1 })
    expect(readFileSync(out, 'utf8')).toContain(`{"id":"${gone}","deletedAt"`)
    expect(await run(['customers', '--out', out, '--page-size', '50'])).toMatchObject({
      unchanged: true,
      pass: 3,
    })
  }, 120_000)

  it('a fixed window is skipped when unchanged; a rolling one only for the same --now', async () => {
    const fixed = join(directory, 'fixed.ndjson')
    const window = ['--since', '2025-01-01T00:00:00.000Z', '--until', '2026-12-31T00:00:00.000Z']
    expect(await run(['appointments', '--out', fixed, ...window])).toMatchObject({ unchanged: false })
    expect(await run(['appointments', '--out', fixed, ...window])).toMatchObject({
      unchanged: true,
      requests: 1,
    })

    const rolling = join(directory, 'rolling.ndjson')
    const night = (now: string) => ['appointments', '--out', rolling, '--window', '-90d..+30d', '--now', now]
    expect(await run(night('2026-11-20T02:00:00.000Z'))).toMatchObject({ complete: true, unchanged: false })
    // The window moved a day: rows may have left it without any write; the pass is read again.
    expect(await run(night('2026-11-21T02:00:00.000Z'))).toMatchObject({ complete: true, unchanged: false })
    // The same night again (a rerun with the same --now): the same query, unchanged.
    expect(await run(night('2026-11-21T02:00:00.000Z'))).toMatchObject({ unchanged: true, requests: 1 })
  }, 120_000)
})
