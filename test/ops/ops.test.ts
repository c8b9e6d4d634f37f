import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { CONTRACT_VERSION } from '../../src/openapi/document.js'
import { Metrics } from '../../src/ops/metrics.js'
import { buildOpsApp } from '../../src/ops/ops-app.js'
import { Readiness } from '../../src/ops/readiness.js'
import { StoreBusyError } from '../../src/store/busy.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

/** One sample line of the Prometheus text, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue
    if (Object.entries(labels).every(([label, value]) => line.includes(`${label}="${value}"`)))
      return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return undefined
}

describeEachStore('the operations listener on %s', (testStore) => {
  let app: FastifyInstance
  let ops: FastifyInstance
  let metrics: Metrics
  let key: string
  let failing: Error | undefined
  const readiness = new Readiness(async () => {
    if (failing) throw failing
    await testStore.store.read((sql) => sql.query('SELECT 1'))
  }, 10_000)

  beforeAll(async () => {
    const org = await createOrg(testStore.store, 'org_ops_secret_id')
    ;({ key } = await createKey(testStore.store, org))
    const store: Store = testStore.store
    metrics = new Metrics({ version: '9.9.9', contractVersion: CONTRACT_VERSION, pools: () => store.pools() })
    ;({ app } = await buildTestApp(store, { logLevel: 'silent', metrics }))
    ops = await buildOpsApp({ metrics, readiness })
  })
  afterAll(async () => {
    await app?.close()
    await ops?.close()
  })

  it('counts requests by route and status, never by key, organization or query', async () => {
    const query = 'limit=7&offset=0'
    for (let i = 0; i < 3; i++) {
      const ok = await app.inject({ url: `/api/public/v1/customers?${query}`, headers: bearer(key) })
      expect(ok.statusCode).toBe(200)
    }
    expect(
      (await app.inject({ url: '/api/public/v1/appointments?status=nope', headers: bearer(key) })).statusCode,
    ).toBe(400)
    expect((await app.inject({ url: '/api/public/v1/customers' })).statusCode).toBe(401)
    expect((await app.inject({ url: '/nowhere/cus_123' })).statusCode).toBe(404)

    const scraped = await ops.inject({ url: '/metrics' })
    expect(scraped.statusCode).toBe(200)
    expect(scraped.headers['content-type']).toMatch(/^text\/plain/)
    const text = scraped.body
    const route = { route: '/api/public/v1/customers', method: 'GET' }
    expect(sample(text, 'openbook_http_requests_total', { ...route, status: '200' })).toBe(3)
    expect(sample(text, 'openbook_http_requests_total', { ...route, status: '401' })).toBe(1)
    expect(
      sample(text, 'openbook_http_requests_total', { route: '/api/public/v1/appointments', status: '400' }),
    ).toBe(1)
    expect(sample(text, 'openbook_http_requests_total', { route: '(no route)', status: '404' })).toBe(1)
    expect(sample(text, 'openbook_http_request_duration_seconds_count', { ...route, status: '200' })).toBe(3)
    // Counted once: a second scrape, after one more request, adds only that request.
    await app.inject({ url: `/api/public/v1/customers?${query}`, headers: bearer(key) })
    const again = (await ops.inject({ url: '/metrics' })).body
    expect(sample(again, 'openbook_http_requests_total', { ...route, status: '200' })).toBe(4)
    expect(sample(again, 'openbook_http_requests_total', { ...route, status: '401' })).toBe(1)
    expect(sample(text, 'openbook_http_requests_in_flight')).toBe(0)
    expect(sample(text, 'openbook_build_info', { version: '9.9.9', contract: CONTRACT_VERSION })).toBe(1)
    const database = testStore.kind === 'postgres' ? 'primary' : 'embedded'
    expect(sample(text, 'openbook_db_pool_connections', { database })).toBeGreaterThanOrEqual(1)
    expect(sample(text, 'openbook_db_pool_waiting_requests', { database })).toBe(0)
    expect(sample(text, 'openbook_last_used_flush_lag_seconds')).toBeGreaterThanOrEqual(0)
    // Nothing that identifies a caller or a record, nor a query value, appears anywhere.
    for (const secret of [key, key.slice(-8), 'org_ops_secret_id', 'cus_123', 'nope', query, 'limit=7'])
      expect(text).not.toContain(secret)
  })

  it('counts store failures by kind', async () => {
    metrics.storeFailed(new StoreBusyError('busy'))
    metrics.storeFailed(
      Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
    )
    metrics.storeFailed(Object.assign(new Error('terminating connection'), { code: '57P01' }))
    const text = (await ops.inject({ url: '/metrics' })).body
    for (const kindOf of ['busy', 'timeout', 'connection'])
      expect(sample(text, 'openbook_store_errors_total', { kind: kindOf })).toBeGreaterThanOrEqual(1)
    expect(text).not.toContain('canceling statement')
  })

  it('healthz is up; readyz follows the store and turns 503 when draining', async () => {
    expect((await ops.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' })
    await readiness.refresh()
    const ready = await ops.inject({ url: '/readyz' })
    expect(ready.statusCode).toBe(200)
    expect(ready.headers['cache-control']).toBe('no-store')
    failing = new Error('the store did not answer')
    // The probe answers what the last check found: the next check finds the fault.
    expect((await ops.inject({ url: '/readyz' })).statusCode).toBe(200)
    await readiness.refresh()
    const down = await ops.inject({ url: '/readyz' })
    expect(down.statusCode).toBe(503)
    expect(down.json()).toEqual({ status: 'not ready', reason: 'the store did not answer' })
    failing = undefined
    await readiness.refresh()
    readiness.draining = true
    const draining = await ops.inject({ url: '/readyz' })
    expect(draining.statusCode).toBe(503)
    expect(draining.json()).toEqual({ status: 'draining' })
    readiness.draining = false
    // Health, readiness and metrics are not on the public port: the contract's surface is unchanged.
    for (const path of ['/healthz', '/readyz', '/metrics'])
      expect((await app.inject({ url: path })).statusCode, path).toBe(404)
  })
})
