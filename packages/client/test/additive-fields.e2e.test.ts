import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import { patience } from './helpers/patience.js'
import { startServer, type TestServer } from './helpers/server.js'
import { rewritingProxy, sync } from './helpers/sync.js'

/**
 * The API may add fields within v1 (docs/integrators/README.md): real pages, passed through a
 * proxy that adds a field to every item, to `pagination` and to the envelope, as a later release
 * might. The client's typed iteration takes them; NDJSON keeps the item's new field (every row as
 * the API sends it); CSV, whose columns are this version's, refuses the run with exit 2 rather
 * than drop the field (the README's promise).
 */

const ADDED = 'loyaltyTier'

/** A page as a later release might send it: a field more in each item, in pagination, in the envelope. */
function withAddedFields(body: unknown): unknown {
  const page = body as { data?: Record<string, unknown>[]; pagination?: object }
  if (!Array.isArray(page.data) || page.pagination === undefined) return body
  return {
    ...page,
    data: page.data.map((item) => ({ ...item, [ADDED]: 'gold' })),
    pagination: { ...page.pagination, cursor: null },
    meta: { generatedBy: 'a later release' },
  }
}

let server: TestServer
let proxy: Awaited<ReturnType<typeof rewritingProxy>>
let directory: string

beforeAll(async () => {
  server = await startServer()
  proxy = await rewritingProxy(server.baseUrl, withAddedFields)
  directory = mkdtempSync(join(tmpdir(), 'openbook-additive-'))
}, patience(180_000))

afterAll(async () => {
  await proxy?.close()
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

const run = (args: readonly string[]) =>
  sync(['customers', '--key-env', 'KEY', '--base-url', proxy.url, '--json', ...args], {
    cwd: directory,
    env: { KEY: server.key },
  }).done

describe('a field added to the API within v1', () => {
  it("the client's typed iteration takes every page, and hands the items on as sent", async () => {
    const direct = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
    const proxied = new Openbook({ apiKey: server.key, baseUrl: proxy.url })
    const expected: string[] = []
    for await (const customer of direct.customers.all()) expected.push(customer.id)
    const seen: string[] = []
    for await (const customer of proxied.customers.all({ pageSize: 40 })) {
      seen.push(customer.id)
      expect((customer as Record<string, unknown>)[ADDED]).toBe('gold')
    }
    expect(expected.length).toBeGreaterThan(40)
    expect(seen).toEqual(expected)
    const page = await proxied.appointments.list({ limit: 5 })
    expect(page.data).toHaveLength(5)
    expect(page.pagination.total).toBeGreaterThan(5)
  })

  it('NDJSON keeps it: every row as the API sends it, exit 0', async () => {
    const out = join(directory, 'customers.ndjson')
    const result = await run(['--out', out])
    expect(result.code, result.stderr).toBe(0)
    const rows = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(rows.length).toBeGreaterThan(40)
    for (const row of rows) expect(row[ADDED]).toBe('gold')
  })

  it('CSV refuses the run, exit 2, naming the field, and writes no row; without the field it runs', async () => {
    const out = join(directory, 'customers.csv')
    const result = await run(['--out', out])
    expect(result.code, result.stderr).toBe(2)
    const why = result.stderr.trim().split('\n').at(-1) ?? ''
    expect(why).toContain(`(${ADDED})`)
    expect(why).toContain('write .ndjson or --pg')
    expect(JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}')).toMatchObject({
      complete: false,
      exitCode: 2,
      error: { code: 'csv_new_field' },
    })
    // The header alone: no row was written without its field.
    expect(readFileSync(out, 'utf8').trim().split('\r\n')).toHaveLength(1)
    // The same command straight to the server (no field added) completes.
    const direct = await sync(
      ['customers', '--key-env', 'KEY', '--base-url', server.baseUrl, '--out', join(directory, 'direct.csv')],
      { cwd: directory, env: { KEY: server.key } },
    ).done
    expect(direct.code, direct.stderr).toBe(0)
  })
})
