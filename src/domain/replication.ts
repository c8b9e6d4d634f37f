import { setTimeout as sleep } from 'node:timers/promises'
import { OperatorError } from '../operator-error.js'
import type { Store } from '../store/types.js'

export interface StandbyReplay {
  /** The standby's application_name (or address). */
  readonly name: string
  /** Seconds from the wait's start until it had replayed the target position. */
  readonly seconds: number
}

export interface ReplayWait {
  /** The primary's WAL position that every standby had to replay; '' without streaming replication. */
  readonly lsn: string
  readonly standbys: readonly StandbyReplay[]
}

const POLL_MS = 50

/**
 * Waits until every standby streaming from the primary has replayed everything committed so far
 * (pg_stat_replication.replay_lsn): after `keys revoke`, a server that reads keys on a replica
 * then refuses the key as the primary does. Throws, naming the standbys still behind, after
 * `timeoutMs`; the change itself is committed either way.
 */
export async function waitForStandbys(store: Store, timeoutMs: number): Promise<ReplayWait> {
  if (store.kind !== 'postgres') return { lsn: '', standbys: [] }
  const [target] = await store.admin((sql) =>
    sql.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'),
  )
  const lsn = target?.lsn ?? ''
  const started = Date.now()
  const replayed = new Map<string, number>()
  for (;;) {
    const rows = await store.admin((sql) =>
      sql.query<{ name: string; state: string | null; replayed: boolean | null }>(
        `SELECT coalesce(nullif(application_name, ''), client_addr::text, pid::text) AS name, state,
                replay_lsn >= $1::pg_lsn AS replayed
         FROM pg_stat_replication ORDER BY 1`,
        [lsn],
      ),
    )
    // Without pg_read_all_stats, a role sees that standbys exist but not how far they are.
    if (rows.some((row) => row.state === null)) {
      throw new OperatorError(
        'revoked; but this role may not see how far the standbys have replayed (pg_stat_replication): ' +
          'GRANT pg_read_all_stats TO the owner, so that revoke can wait for them',
      )
    }
    const elapsed = (Date.now() - started) / 1000
    for (const row of rows) if (row.replayed && !replayed.has(row.name)) replayed.set(row.name, elapsed)
    const behind = rows.filter((row) => !replayed.has(row.name)).map((row) => row.name)
    if (behind.length === 0) {
      return { lsn, standbys: rows.map((row) => ({ name: row.name, seconds: replayed.get(row.name) ?? 0 })) }
    }
    if (Date.now() - started > timeoutMs) {
      throw new OperatorError(
        `revoked on the primary, but standby ${behind.join(', ')} has not replayed it after ${Math.round(timeoutMs / 1000)} s: ` +
          'a server reading keys there may still accept the key until it does',
      )
    }
    await sleep(POLL_MS)
  }
}
