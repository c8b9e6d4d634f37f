import { afterEach, describe, expect, it, vi } from 'vitest'
import { Metrics } from '../../src/ops/metrics.js'
import { buildOpsApp } from '../../src/ops/ops-app.js'
import { CHECK_TIMEOUT_MS, observedStore, Readiness } from '../../src/ops/readiness.js'
import { CommitOutcomeUnknownError, PoolExhaustedError, StoreBusyError } from '../../src/store/busy.js'
import type { Store } from '../../src/store/types.js'

/** A readiness whose check fails with `failure` (when set), or never answers (`hang`), on a clock the test moves. */
function readinessWith(graceMs: number) {
  const state: { failure: Error | undefined; hang: boolean; now: number; checks: number } = {
    failure: undefined,
    hang: false,
    now: 1_000_000,
    checks: 0,
  }
  const readiness = new Readiness(
    async () => {
      state.checks++
      if (state.hang) await new Promise(() => undefined)
      if (state.failure) throw state.failure
    },
    graceMs,
    () => state.now,
  )
  return { readiness, state }
}

const refused = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6432'), { code: 'ECONNREFUSED' })

afterEach(() => {
  vi.useRealTimers()
})

describe('readiness: this instance can serve', () => {
  it('stays 200 through an outage of the store shorter than the grace, then 503 until it answers again', async () => {
    const { readiness, state } = readinessWith(10_000)
    expect(await readiness.refresh()).toEqual({ statusCode: 200, body: { status: 'ready', store: 'ok' } })
    state.failure = refused()
    const during = await readiness.refresh()
    expect(during.statusCode).toBe(200)
    expect(during.body).toMatchObject({ status: 'ready', store: 'unreachable', seconds: 0 })
    state.now += 9_900
    expect((await readiness.refresh()).statusCode).toBe(200)
    state.now += 100
    const after = await readiness.refresh()
    expect(after.statusCode).toBe(503)
    expect(after.body).toMatchObject({ status: 'not ready', store: 'unreachable', seconds: 10 })
    state.failure = undefined
    expect((await readiness.refresh()).statusCode).toBe(200)
    // A new outage starts its own grace.
    state.failure = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    })
    expect((await readiness.refresh()).statusCode).toBe(200)
  })

  it('a busy embedded store counts as an outage; a schema or privilege fault is 503 at once', async () => {
    const { readiness, state } = readinessWith(10_000)
    state.failure = new StoreBusyError('DATA_DIR is busy')
    expect((await readiness.refresh()).statusCode).toBe(200)
    state.failure = new Error('openbook_reader lacks SELECT on table customers')
    expect(await readiness.refresh()).toEqual({
      statusCode: 503,
      body: { status: 'not ready', reason: 'openbook_reader lacks SELECT on table customers' },
    })
    // A request that succeeds says the store answers, not that the privilege is back: the check does.
    readiness.succeeded()
    expect(readiness.report().statusCode).toBe(503)
    state.failure = undefined
    expect((await readiness.refresh()).statusCode).toBe(200)
  })

  it("a check whose COMMIT lost its connection meets an outage; one that found the check's connection busy says nothing new", async () => {
    const { readiness, state } = readinessWith(10_000)
    state.failure = new CommitOutcomeUnknownError(refused())
    expect((await readiness.refresh()).body).toMatchObject({ status: 'ready', store: 'unreachable' })
    state.failure = undefined
    expect((await readiness.refresh()).body).toEqual({ status: 'ready', store: 'ok' })
    state.failure = new PoolExhaustedError(1, 1_500, 0)
    expect(await readiness.refresh()).toEqual({ statusCode: 200, body: { status: 'ready', store: 'ok' } })
  })

  it('draining is 503 whatever the store does', async () => {
    const { readiness } = readinessWith(10_000)
    readiness.draining = true
    expect(readiness.report()).toEqual({ statusCode: 503, body: { status: 'draining' } })
  })

  it('answers at once from what it knows while a check waits on the store; a check that never answers is an outage', async () => {
    vi.useFakeTimers()
    const { readiness, state } = readinessWith(10_000)
    state.hang = true
    const checking = readiness.refresh()
    // The report does not wait for the check under way.
    expect(readiness.report()).toEqual({ statusCode: 200, body: { status: 'ready', store: 'ok' } })
    // One check at a time: a second refresh joins the first.
    void readiness.refresh()
    expect(state.checks).toBe(1)
    await vi.advanceTimersByTimeAsync(CHECK_TIMEOUT_MS)
    expect((await checking).body).toMatchObject({
      status: 'ready',
      store: 'unreachable',
      reason: 'the store did not answer in time',
    })
  })

  it("requests' outcomes keep it current between checks: an unreachable store starts the grace, an answer ends it", () => {
    const { readiness, state } = readinessWith(10_000)
    readiness.failed(new Error('page out of range'))
    expect(readiness.report().body).toEqual({ status: 'ready', store: 'ok' })
    readiness.failed(refused())
    expect(readiness.report()).toEqual({
      statusCode: 200,
      body: {
        status: 'ready',
        store: 'unreachable',
        seconds: 0,
        reason: 'connect ECONNREFUSED 127.0.0.1:6432',
      },
    })
    state.now += 4_000
    // Still the same outage: its start is kept.
    readiness.failed(refused())
    state.now += 6_000
    expect(readiness.report().statusCode).toBe(503)
    readiness.succeeded()
    expect(readiness.report()).toEqual({ statusCode: 200, body: { status: 'ready', store: 'ok' } })
  })

  it('checks in the background until stopped', async () => {
    vi.useFakeTimers()
    const { readiness, state } = readinessWith(10_000)
    readiness.start(1_000)
    await vi.advanceTimersByTimeAsync(0)
    expect(state.checks).toBe(1)
    state.failure = refused()
    await vi.advanceTimersByTimeAsync(1_000)
    expect(state.checks).toBe(2)
    expect(readiness.report().body).toMatchObject({ store: 'unreachable' })
    readiness.stop()
    await vi.advanceTimersByTimeAsync(5_000)
    expect(state.checks).toBe(2)
  })

  it("the server's store tells readiness each request's outcome, and passes the request's own result or error on", async () => {
    const { readiness } = readinessWith(10_000)
    let failure: Error | undefined
    const store = {
      kind: 'postgres',
      read: async () => {
        if (failure) throw failure
        return 'page'
      },
    } as unknown as Store
    const observed = observedStore(store, readiness)
    expect(observed.kind).toBe('postgres')
    failure = refused()
    await expect(observed.read(async () => undefined)).rejects.toBe(failure)
    expect(readiness.report().body).toMatchObject({ store: 'unreachable' })
    failure = undefined
    expect(await observed.read(async () => undefined)).toBe('page')
    expect(readiness.report().body).toEqual({ status: 'ready', store: 'ok' })
  })

  it('/healthz stays 200 whatever the store does: past the grace of an outage, with /readyz 503, and on a hung check', async () => {
    const { readiness, state } = readinessWith(10_000)
    const ops = await buildOpsApp({
      metrics: new Metrics({ version: '0.0.0', contractVersion: '0', pools: () => [] }),
      readiness,
    })
    try {
      const live = async () => {
        const response = await ops.inject({ url: '/healthz' })
        return `${response.statusCode} ${response.body}`
      }
      state.failure = refused()
      await readiness.refresh()
      state.now += 60_000
      expect((await ops.inject({ url: '/readyz' })).statusCode).toBe(503)
      expect(await live()).toBe('200 {"status":"ok"}')
      state.failure = new Error('openbook_reader lacks SELECT on table customers')
      await readiness.refresh()
      expect(await live()).toBe('200 {"status":"ok"}')
      // A check that never comes back holds neither probe.
      state.hang = true
      void readiness.refresh()
      expect(await live()).toBe('200 {"status":"ok"}')
      expect((await ops.inject({ url: '/readyz' })).statusCode).toBe(503)
    } finally {
      await ops.close()
    }
  })
})
