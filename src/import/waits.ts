import type { AdminSql, Store } from '../store/types.js'

/** How often the import's backend is looked at, and how long it waits before the wait is said. */
const LOOK_EVERY_MS = 200
const SAY_AFTER_MS = 800

interface Blocker {
  readonly pid: number
  readonly lock: string
  readonly since: string | null
  readonly who: string | null
}

/**
 * Says, within a second, when the import waits for its turn on a store that runs one transaction
 * at a time (PGlite, held by another operator's transaction). Returns the function to call once
 * the import's transaction has begun.
 */
export function sayTurnWait(store: Store, say: (line: string) => void): () => void {
  const timer = setTimeout(() => {
    const holder = store.holder?.()
    if (holder)
      say(
        `waiting: the store held by ${holder.what} since ${holder.since.toISOString()}; ` +
          'the import goes on when it ends',
      )
  }, SAY_AFTER_MS)
  timer.unref()
  return () => clearTimeout(timer)
}

/**
 * Says, within a second, when the import's transaction waits on a lock another session holds
 * (a booking application's long transaction, another import's fold): once per holder, with its
 * pid and since when its transaction runs. Looks from the store's probe connection, beside the
 * import's own; a store without one (PGlite: one connection) has no other session to wait on.
 * Returns the function that stops looking.
 */
export async function sayWaits(
  store: Store,
  sql: AdminSql,
  say: (line: string) => void,
): Promise<() => void> {
  const probe = store.probe
  if (!probe) return () => {}
  const [row] = await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
  const pid = row?.pid
  if (pid === undefined) return () => {}
  const said = new Set<number>()
  let waitingSince: number | undefined
  let looking = false
  const look = async () => {
    if (looking) return
    looking = true
    try {
      const blockers = await probe((probeSql) =>
        probeSql.query<Blocker>(
          `SELECT b.pid, coalesce(l.mode || ' on ' || coalesce(l.relation::regclass::text, l.locktype), 'a lock') AS lock,
                  to_char(b.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS since,
                  nullif(concat_ws(' ', b.usename, nullif(b.application_name, '')), '') AS who
           FROM unnest(pg_blocking_pids($1)) h(pid)
           JOIN pg_stat_activity b ON b.pid = h.pid
           LEFT JOIN LATERAL (SELECT w.mode, w.relation, w.locktype FROM pg_locks w
                              WHERE w.pid = $1 AND NOT w.granted LIMIT 1) l ON true`,
          [pid],
        ),
      )
      if (blockers.length === 0) {
        waitingSince = undefined
        return
      }
      waitingSince ??= Date.now()
      if (Date.now() - waitingSince < SAY_AFTER_MS) return
      for (const blocker of blockers) {
        if (said.has(blocker.pid)) continue
        said.add(blocker.pid)
        say(
          `waiting: ${blocker.lock} held by pid ${blocker.pid}${blocker.who ? ` (${blocker.who})` : ''}` +
            `${blocker.since ? ` since ${blocker.since}` : ''}; the import goes on when it is released`,
        )
      }
    } catch {
      // Looking is best effort: the import itself says what fails.
    } finally {
      looking = false
    }
  }
  const timer = setInterval(() => void look(), LOOK_EVERY_MS)
  timer.unref()
  return () => clearInterval(timer)
}
