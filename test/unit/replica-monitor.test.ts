import { afterEach, describe, expect, it } from 'vitest'
import type { Database } from '../../src/store/postgres/connection.js'
import { NOT_A_STANDBY, ReplicaMonitor, type ReplicaState } from '../../src/store/postgres/replica.js'

/** A database whose every query answers `rows(text)`. */
function fakeDatabase(rows: (text: string) => Record<string, unknown>[]): Database {
  return {
    pool: undefined as never,
    transaction: (async (_mode: unknown, work: (sql: unknown) => Promise<unknown>) =>
      work({ query: async (text: string) => rows(text) })) as Database['transaction'],
  }
}

describe('the replica monitor', () => {
  let monitor: ReplicaMonitor | undefined
  afterEach(() => monitor?.stop())

  it('a replica URL that names a promoted server (out of recovery) reports "not a standby", not a growing lag', async () => {
    let primaryLsn = 0x1000
    const primary = fakeDatabase(() => {
      primaryLsn += 0x100
      return [{ lsn: `0/${primaryLsn.toString(16)}` }]
    })
    // The promoted server keeps the last position it replayed while it was a standby.
    const promoted = fakeDatabase(() => [{ standby: false, replay: '0/1000' }])
    const changes: [ReplicaState, string][] = []
    monitor = new ReplicaMonitor(primary, promoted, 5_000, {
      stateChanged: (state, detail) => changes.push([state, detail]),
      fellBack: () => undefined,
    })
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      await monitor.check()
    }
    expect(monitor.lagSeconds).toBeUndefined()
    expect(monitor.state).toBe('down')
    expect(changes).toEqual([['down', NOT_A_STANDBY]])
  })

  it('a standby that has replayed everything is 0 s behind', async () => {
    const primary = fakeDatabase(() => [{ lsn: '0/2000' }])
    const standby = fakeDatabase(() => [{ standby: true, replay: '0/2000' }])
    monitor = new ReplicaMonitor(primary, standby, 5_000, undefined)
    await monitor.check()
    expect(monitor.lagSeconds).toBe(0)
    expect(monitor.state).toBe('ok')
  })
})
