import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from './helpers/patience.js'
import { startServer, type TestServer } from './helpers/server.js'
import { deactivateCustomers, rewritingProxy, sync } from './helpers/sync.js'

/**
 * A row missing from a pass is marked deleted only once a pass can tell it is gone; while the list
 * changes under every pass (here: a proxy that drops If-None-Match, so every check of the list
 * sees it changed), it stays as it is. Such a run says so on standard error and in --json, and once
 * the oldest has stayed unsettled for --max-deferred-passes passes, exits 5 for the scheduler.
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

const out = () => join(directory, 'customers.ndjson')
const pass = async (baseUrl: string, ...args: string[]) => {
  const result = await sync(
    ['customers', '--key-env', 'KEY', '--base-url', baseUrl, '--out', out(), '--json', ...args],
    {
      cwd: directory,
      env: { KEY: server.key },
    },
  ).done
  return { ...result, summary: JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') }
}

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
  it('says how many and since when, exits 5 past --max-deferred-passes, and settles them once the list stands still', async () => {
    expect((await pass(server.baseUrl)).code).toBe(0)
    const [gone] = await deactivateCustomers(server, 10, 1)

    // Pass 2 misses the row and cannot tell why: kept, said, exit 0.
    const second = await pass(proxy.url, '--max-deferred-passes', '2')
    expect(second.code, second.stderr).toBe(0)
    expect(second.summary).toMatchObject({
      complete: true,
      pass: 2,
      deferred: 1,
      deferredSince: 2,
      tombstones: 0,
    })
    expect(second.stderr).toContain('1 row missing since pass 2 not settled')

    // Pass 3 reads the list again and still cannot: one pass unsettled, under the threshold of 2.
    const third = await pass(proxy.url, '--max-deferred-passes', '2')
    expect(third.code, third.stderr).toBe(0)
    expect(third.summary).toMatchObject({ pass: 3, deferred: 1, deferredSince: 2 })

    // Pass 4: two passes unsettled, the threshold: the pass is written, and the run exits 5.
    const fourth = await pass(proxy.url, '--max-deferred-passes', '2')
    expect(fourth.code, fourth.stderr).toBe(5)
    expect(fourth.summary).toMatchObject({
      complete: true,
      pass: 4,
      deferred: 1,
      deferredSince: 2,
      exitCode: 5,
    })
    expect(fourth.stderr).toContain('deletions unsettled for 2 passes (--max-deferred-passes 2)')
    expect(readFileSync(out(), 'utf8')).not.toContain('"deletedAt"')

    // Straight to the server, the list stands still while the pass checks it: the row is deleted.
    const fifth = await pass(server.baseUrl, '--max-deferred-passes', '2')
    expect(fifth.code, fifth.stderr).toBe(0)
    expect(fifth.summary).toMatchObject({ deferred: 0, deferredSince: null, tombstones: 1 })
    expect(fifth.stderr).not.toContain('not settled')
    const tombstones = readFileSync(out(), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; deletedAt?: string })
      .filter((row) => row.deletedAt !== undefined)
    expect(tombstones.map((row) => row.id)).toEqual([gone])
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
