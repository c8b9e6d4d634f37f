import { describe, expect, it } from 'vitest'
import { Readiness } from '../../src/ops/readiness.js'
import { StoreBusyError } from '../../src/store/busy.js'

/** A readiness whose check fails with `failure` (when set), on a clock the test moves. */
function readinessWith(graceMs: number) {
  const state: { failure: Error | undefined; now: number } = { failure: undefined, now: 1_000_000 }
  const readiness = new Readiness(
    async () => {
      if (state.failure) throw state.failure
    },
    graceMs,
    () => state.now,
  )
  return { readiness, state }
}

const refused = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6432'), { code: 'ECONNREFUSED' })

describe('readiness: this instance can serve', () => {
  it('stays 200 through an outage of the store shorter than the grace, then 503 until it answers again', async () => {
    const { readiness, state } = readinessWith(10_000)
    expect(await readiness.report()).toEqual({ statusCode: 200, body: { status: 'ready', store: 'ok' } })
    state.failure = refused()
    const during = await readiness.report()
    expect(during.statusCode).toBe(200)
    expect(during.body).toMatchObject({ status: 'ready', store: 'unreachable', seconds: 0 })
    state.now += 9_900
    expect((await readiness.report()).statusCode).toBe(200)
    state.now += 100
    const after = await readiness.report()
    expect(after.statusCode).toBe(503)
    expect(after.body).toMatchObject({ status: 'not ready', store: 'unreachable', seconds: 10 })
    state.failure = undefined
    expect((await readiness.report()).statusCode).toBe(200)
    // A new outage starts its own grace.
    state.failure = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    })
    expect((await readiness.report()).statusCode).toBe(200)
  })

  it('a busy embedded store counts as an outage; a schema or privilege fault is 503 at once', async () => {
    const { readiness, state } = readinessWith(10_000)
    state.failure = new StoreBusyError('DATA_DIR is busy')
    expect((await readiness.report()).statusCode).toBe(200)
    state.failure = new Error('openbook_reader lacks SELECT on table customers')
    expect(await readiness.report()).toEqual({
      statusCode: 503,
      body: { status: 'not ready', reason: 'openbook_reader lacks SELECT on table customers' },
    })
  })

  it('draining is 503 whatever the store does', async () => {
    const { readiness } = readinessWith(10_000)
    readiness.draining = true
    expect(await readiness.report()).toEqual({ statusCode: 503, body: { status: 'draining' } })
  })
})
