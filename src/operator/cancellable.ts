import type { AdminSql, Sql, Store } from '../store/types.js'

function guarded<S extends Sql>(sql: S, signal: AbortSignal): S {
  const into = sql.queryInto
  const wrapped: Sql = {
    ...sql,
    query: (text, params) => {
      signal.throwIfAborted()
      return sql.query(text, params)
    },
    exec: (text) => {
      signal.throwIfAborted()
      return sql.exec(text)
    },
    ...(into
      ? {
          queryInto: (sink, text, params) => {
            signal.throwIfAborted()
            return into(sink, text, params)
          },
        }
      : {}),
  }
  if ('copyIn' in sql) {
    const admin = sql as unknown as AdminSql
    return {
      ...wrapped,
      copyIn: (table: string, columns: readonly string[], text: string) => {
        signal.throwIfAborted()
        return admin.copyIn(table, columns, text)
      },
    } as unknown as S
  }
  return wrapped as S
}

/**
 * The store as a cancellable command sees it: once `signal` is aborted, the next statement throws
 * its reason, so the command's transaction rolls back at the next statement (an import or seed
 * at its next chunk) instead of running to the end.
 */
export function cancellable(store: Store, signal: AbortSignal): Store {
  return {
    ...store,
    kind: store.kind,
    read: (work, options) => store.read((sql) => work(guarded(sql, signal)), options),
    asReader: (work) => store.asReader((sql) => work(guarded(sql, signal))),
    admin: (work) => store.admin((sql) => work(guarded(sql, signal))),
    close: () => store.close(),
  }
}
