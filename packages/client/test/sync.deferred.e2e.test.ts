import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Appointment, Openbook } from '../src/index.js'
import { patience } from './helpers/patience.js'
import { startServer, type TestServer } from './helpers/server.js'
import { deactivateCustomers, rewritingProxy, sync } from './helpers/sync.js'

/**
 * A row missing from a pass is marked deleted only once a pass can tell it is gone, or once the
 * next pass misses it too; while the list changes under every pass (here: a proxy that drops
 * If-None-Match, so every check of the list sees it changed), it stays as it is until then. A
 * window's rows wait (missed twice, one may have left the window): such a run says so on
 * standard error and in --json, and once the oldest has stayed unsettled for
 * --max-deferred-passes passes, exits 5 for the scheduler.
 */

let server: TestServer
let directory: string
let proxy: Awaited<ReturnType<typeof rewritingProxy>>

beforeAll(async () => {
  server = await startServer()
  directory = mkdtempSync(join(tmpdir(), 'openbook-deferred-'))
  proxy = await rewritingProxy(server.baseUrl, (body) => body, { forgetTags: true })
}, patience(180_000))

afterAll(async () => {
  await proxy?.close()
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

const run = async (baseUrl: string, args: string[]) => {
  const result = await sync([...args, '--key-env', 'KEY', '--base-url', baseUrl, '--json'], {
    cwd: directory,
    env: { KEY: server.key },
  }).done
  return { ...result, summary: JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') }
}
const tombstonesOf = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { id: string; deletedAt?: string })
    .filter((row) => row.deletedAt !== undefined)
    .map((row) => row.id)

/** A small salon: all its customers fit in one page. */
const SMALL = 'org_small_salon'
const smallCustomer = (n: number, isActive: boolean) => ({
  type: 'customer',
  id: `cus_small_${n}`,
  orgId: SMALL,
  isActive,
  createdAt: new Date(Date.UTC(2026, 0, 1, n)).toISOString(),
  updatedAt: new Date(Date.UTC(2026, 0, 2, n)).toISOString(),
})

describe('openbook-sync: deletions it cannot settle', () => {
  it('keeps a row the list moved under for one pass, said, and marks it deleted when the next pass misses it too', async () => {
    const out = join(directory, 'customers.ndjson')
    const pass = (baseUrl: string) => run(baseUrl, ['customers', '--out', out])
    expect((await pass(server.baseUrl)).code).toBe(0)
    const [gone] = await deactivateCustomers(server, 10, 1)

    // Pass 2 misses the row and cannot tell why: kept, said, exit 0.
    const second = await pass(proxy.url)
    expect(second.code, second.stderr).toBe(0)
    expect(second.summary).toMatchObject({
      complete: true,
      pass: 2,
      deferred: 1,
      deferredSince: 2,
      tombstones: 0,
    })
    expect(second.stderr).toContain('1 row missing since pass 2 not settled')
    expect(readFileSync(out, 'utf8')).not.toContain('"deletedAt"')

    // Pass 3, under the same writes, misses it again: an active row is missed only while it
    // moves across the pass, so twice in a row it is gone.
    const third = await pass(proxy.url)
    expect(third.code, third.stderr).toBe(0)
    expect(third.summary).toMatchObject({
      complete: true,
      pass: 3,
      deferred: 0,
      deferredSince: null,
      tombstones: 1,
    })
    expect(third.stderr).not.toContain('not settled')
    expect(tombstonesOf(out)).toEqual([gone])
  })

  it("keeps a window's row that nothing settles, exits 5 past --max-deferred-passes, and settles it once the list stands still", async () => {
    const now = '2040-06-01T00:00:00.000Z'
    const at = (days: number) => new Date(Date.parse(now) + days * 86_400_000).toISOString()
    // Appointments without a customer (no customer's list to look one up in) over two pages, and
    // outside the window more than a pass's lookups may read (a rolling window over years).
    const appointment = (n: number, isActive = true) => ({
      type: 'appointment',
      id: `apt_deferred_${n}`,
      orgId: 'org_demo',
      start: at(n / 10),
      end: at(n / 10 + 0.01),
      status: 'confirmed',
      isActive,
      createdAt: '2040-01-01T00:00:00.000Z',
      updatedAt: '2040-01-01T00:00:00.000Z',
    })
    await server.importLines(Array.from({ length: 150 }, (_, n) => appointment(n)))
    await server.importLines(
      Array.from({ length: 2_500 }, (_, n) => ({ ...appointment(-20 - n), id: `apt_deferred_history_${n}` })),
    )
    const out = join(directory, 'window.ndjson')
    const pass = (baseUrl: string) =>
      run(baseUrl, [
        'appointments',
        '--window',
        '-1d..+30d',
        '--now',
        now,
        '--out',
        out,
        '--max-deferred-passes',
        '2',
      ])
    expect((await pass(server.baseUrl)).code).toBe(0)
    await server.importLines([appointment(42, false)])

    const second = await pass(proxy.url)
    expect(second.code, second.stderr).toBe(0)
    expect(second.summary).toMatchObject({
      complete: true,
      pass: 2,
      deferred: 1,
      deferredSince: 2,
      tombstones: 0,
    })
    // Pass 3: one pass unsettled, under the threshold of 2.
    const third = await pass(proxy.url)
    expect(third.code, third.stderr).toBe(0)
    expect(third.summary).toMatchObject({ pass: 3, deferred: 1, deferredSince: 2 })
    // Pass 4: two passes unsettled, the threshold: the pass is written, and the run exits 5.
    const fourth = await pass(proxy.url)
    expect(fourth.code, fourth.stderr).toBe(5)
    expect(fourth.summary).toMatchObject({
      complete: true,
      pass: 4,
      deferred: 1,
      deferredSince: 2,
      exitCode: 5,
    })
    expect(fourth.stderr).toContain('deletions unsettled for 2 passes (--max-deferred-passes 2)')
    expect(readFileSync(out, 'utf8')).not.toContain('"deletedAt"')

    // Straight to the server, the list stands still while the pass checks it: the row is deleted.
    const fifth = await pass(server.baseUrl)
    expect(fifth.code, fifth.stderr).toBe(0)
    expect(fifth.summary).toMatchObject({ deferred: 0, deferredSince: null, tombstones: 1 })
    expect(fifth.stderr).not.toContain('not settled')
    expect(tombstonesOf(out)).toEqual(['apt_deferred_42'])
  })

  it("settles a window's row missed twice by the list outside the window, when that is short: deleted, or left the window", async () => {
    const now = '2060-06-01T00:00:00.000Z'
    const at = (days: number) => new Date(Date.parse(now) + days * 86_400_000).toISOString()
    const orphan = (name: string, start: string, isActive = true) => ({
      type: 'appointment',
      id: `apt_wide_${name}`,
      orgId: 'org_demo',
      start,
      end: new Date(Date.parse(start) + 3_600_000).toISOString(),
      status: 'confirmed',
      isActive,
      createdAt: '2040-01-01T00:00:00.000Z',
      updatedAt: '2040-01-01T00:00:00.000Z',
    })
    await server.importLines([orphan('gone', at(3)), orphan('moved', at(4))])
    const out = join(directory, 'wide.ndjson')
    // A window of all the demo's appointments: outside it, only what moves there.
    const pass = (baseUrl: string) =>
      run(baseUrl, ['appointments', '--window', '-30000d..+20000d', '--now', now, '--out', out])
    expect((await pass(server.baseUrl)).code).toBe(0)
    await server.importLines([orphan('gone', at(3), false), orphan('moved', '1901-01-01T00:00:00.000Z')])
    const second = await pass(proxy.url)
    expect(second.code, second.stderr).toBe(0)
    expect(second.summary).toMatchObject({
      complete: true,
      checked: 2,
      deferred: 2,
      tombstones: 0,
      leftWindow: 0,
    })
    const third = await pass(proxy.url)
    expect(third.code, third.stderr).toBe(0)
    expect(third.summary).toMatchObject({ complete: true, deferred: 0, tombstones: 1, leftWindow: 1 })
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string })
    expect(lines.filter((row) => 'deletedAt' in row).map((row) => row.id)).toEqual(['apt_wide_gone'])
    expect(lines.filter((row) => 'leftWindowAt' in row).map((row) => row.id)).toEqual(['apt_wide_moved'])
  })

  it("holds a pass's lookups to a plain read's requests, and settles the rows beyond them in the next pass", async () => {
    const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
    const out = join(directory, 'appointments.ndjson')
    const pass = (baseUrl: string) => run(baseUrl, ['appointments', '--out', out])
    expect((await pass(server.baseUrl)).code).toBe(0)
    // Appointments of as many customers as a plain read has pages, and 30 more: a lookup each.
    const first = await openbook.appointments.list({ limit: 1 })
    const plain = Math.ceil(first.pagination.total / 99)
    const gone = new Map<string, Appointment>()
    for await (const row of openbook.appointments.all({}, { pageSize: 99 })) {
      if (row.customerId !== undefined && ![...gone.values()].some((g) => g.customerId === row.customerId))
        gone.set(row.id, row)
      if (gone.size === Math.max(20, plain) + 30) break
    }
    await server.importLines(
      [...gone.values()].map((row) => ({
        type: 'appointment',
        id: row.id,
        orgId: 'org_demo',
        customerId: row.customerId,
        start: row.start,
        end: row.end,
        status: row.status,
        isActive: false,
        createdAt: row.createdAt,
        updatedAt: row.updatedAt,
      })),
    )
    const second = await pass(proxy.url)
    expect(second.code, second.stderr).toBe(0)
    const { checked, tombstones, deferred, requests } = second.summary
    expect(checked).toBe(gone.size)
    expect(tombstones + deferred).toBe(gone.size)
    // Each row looked up is looked up whole (its customer and its start): those are settled now.
    expect(tombstones).toBeGreaterThan(0)
    expect(deferred).toBeGreaterThan(0)
    // The pages, the check that the list stood still, and the lookups: at most a plain read, and
    // the one other lookup in flight when the budget ran out.
    expect(requests).toBeLessThanOrEqual(plain + 2 + Math.max(20, plain) + 1)
    const third = await pass(proxy.url)
    expect(third.code, third.stderr).toBe(0)
    expect(third.summary).toMatchObject({ complete: true, deferred: 0 })
    expect(new Set(tombstonesOf(out))).toEqual(new Set(gone.keys()))
  })

  it('settles a list read in one page at once: one statement read it, whatever the list did since', async () => {
    await server.importLines([
      { type: 'organization', id: SMALL, name: 'Small', plan: 'professional' },
      { type: 'user', id: 'usr_small', email: 'owner@small.test' },
      { type: 'membership', orgId: SMALL, userId: 'usr_small', role: 'owner' },
      ...Array.from({ length: 40 }, (_, n) => smallCustomer(n, true)),
    ])
    const created = await server.cli([
      'keys',
      'create',
      '--org',
      SMALL,
      '--as',
      'owner@small.test',
      '--env',
      'test',
      '--json',
    ])
    const key = (JSON.parse(created) as { key: string }).key
    const file = join(directory, 'small.ndjson')
    const smallPass = async () => {
      const result = await sync(
        ['customers', '--key-env', 'KEY', '--base-url', proxy.url, '--out', file, '--json'],
        {
          cwd: directory,
          env: { KEY: key },
        },
      ).done
      return { ...result, summary: JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') }
    }
    expect((await smallPass()).code).toBe(0)
    await server.importLines([smallCustomer(7, false)])
    // Through the proxy every check of the list sees it changed; the pass read it in one request.
    const second = await smallPass()
    expect(second.code, second.stderr).toBe(0)
    expect(second.summary).toMatchObject({ complete: true, requests: 1, deferred: 0, tombstones: 1 })
    expect(readFileSync(file, 'utf8')).toContain('{"id":"cus_small_7","deletedAt"')
  })
})
