import type { Database } from './connection.js'
import { OPERATOR, type TransactionMode } from './connection.js'

/** Which database serves the request path's reads, by how far the replica is behind. */

export type ReplicaState = 'ok' | 'down' | 'behind'

export interface ReplicaEvents {
  stateChanged(state: ReplicaState, detail: string): void
  fellBack(reason: Exclude<ReplicaState, 'ok'>): void
}

/** A WAL position ('16/B374D848') as a number of bytes; exact up to 2^53 (8 PiB of WAL). */
function lsnBytes(lsn: string): number {
  const [high = '0', low = '0'] = lsn.split('/')
  return Number.parseInt(high, 16) * 2 ** 32 + Number.parseInt(low, 16)
}

const MONITOR_EVERY_MS = 1_000

/** Why the replica serves no reads when DATABASE_READ_URL names a server out of recovery (a primary). */
export const NOT_A_STANDBY =
  'not a standby: the server in DATABASE_READ_URL is out of recovery (promoted, or a primary)'

/**
 * Watches how far the replica is behind: every second it notes the primary's WAL position and the
 * replica's replay position. The lag is the age of the oldest primary position the replica has
 * not replayed yet, so it is exact to the second whatever the replica's clock or the write rate.
 */
export class ReplicaMonitor {
  state: ReplicaState = 'ok'
  lagSeconds: number | undefined = 0
  readonly #samples: { at: number; lsn: number }[] = []
  readonly #timer: NodeJS.Timeout
  #checking = false

  constructor(
    private readonly primary: Database,
    private readonly replica: Database,
    private readonly maxLagMs: number,
    private readonly events: ReplicaEvents | undefined,
  ) {
    this.#timer = setInterval(() => void this.check(), MONITOR_EVERY_MS)
    this.#timer.unref()
    void this.check()
  }

  markDown(error: unknown): void {
    this.#set('down', (error as Error).message?.split('\n')[0] ?? 'unreachable')
  }

  async check(): Promise<void> {
    if (this.#checking) return
    this.#checking = true
    try {
      const [current] = await this.primary.transaction(OPERATOR, (sql) =>
        sql.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'),
      )
      if (current) this.#samples.push({ at: Date.now(), lsn: lsnBytes(current.lsn) })
    } catch {
      // The primary's own trouble is not the replica's: keep the last state.
      this.#checking = false
      return
    }
    try {
      const probe: TransactionMode = {
        preamble: 'SET LOCAL statement_timeout = 2000',
        request: false,
        readOnly: true,
      }
      const [row] = await this.replica.transaction(probe, (sql) =>
        sql.query<{ standby: boolean; replay: string | null }>(
          'SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replay',
        ),
      )
      // A promoted server keeps the last position it replayed as a standby: measured against the
      // primary's, its lag would grow for ever. It is not behind; it is no standby (a failover
      // whose replica URL still names the promoted server): the lag is unknown, reads go to the primary.
      if (row && !row.standby) throw new Error(NOT_A_STANDBY)
      if (!row?.replay) throw new Error('not a streaming replica (no replay position)')
      const replayed = lsnBytes(row.replay)
      while (this.#samples.length > 1 && (this.#samples[0]?.lsn ?? 0) <= replayed) this.#samples.shift()
      const oldest = this.#samples[0]
      const lagMs = oldest && oldest.lsn > replayed ? Date.now() - oldest.at : 0
      this.lagSeconds = lagMs / 1000
      this.#set(lagMs > this.maxLagMs ? 'behind' : 'ok', `${this.lagSeconds.toFixed(1)} s behind`)
    } catch (error) {
      this.lagSeconds = undefined
      this.markDown(error)
    } finally {
      // Bounded: one sample a second, dropped once replayed.
      if (this.#samples.length > 3_600) this.#samples.splice(0, this.#samples.length - 3_600)
      this.#checking = false
    }
  }

  stop(): void {
    clearInterval(this.#timer)
  }

  #set(state: ReplicaState, detail: string): void {
    if (state === this.state) return
    this.state = state
    this.events?.stateChanged(state, detail)
  }
}
