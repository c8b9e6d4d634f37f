import { mkdirSync } from 'node:fs'
import { PGlite, type Transaction } from '@electric-sql/pglite'
import { type AdminSql, copyStatement, readerPreamble, type Store } from './types.js'

function sqlOf(tx: Transaction | PGlite): AdminSql {
  return {
    jsonPages: true,
    async query<Row extends object>(text: string, params: readonly unknown[] = []) {
      const result = await tx.query<Row>(text, params as unknown[])
      return result.rows
    },
    async exec(text: string) {
      await tx.exec(text)
    },
    async copyIn(table, columns, text) {
      await tx.query(copyStatement(table, columns, "'/dev/blob'"), [], { blob: new Blob([text]) })
    },
  }
}

export interface EmbeddedStore extends Store {
  readonly db: PGlite
}

/** PGlite in `dataDir` (or in memory with `memory://`). PGlite runs one transaction at a time. */
export async function createEmbeddedStore(
  dataDir: string,
  statementTimeoutMs = 5_000,
): Promise<EmbeddedStore> {
  // A new DATA_DIR is its owner's alone: it holds key hashes and customers' personal data.
  if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const db = await PGlite.create(dataDir)

  function transaction<T>(preamble: string, work: (sql: AdminSql) => Promise<T>): Promise<T> {
    return db.transaction(async (tx) => {
      if (preamble) await tx.exec(preamble)
      return work(sqlOf(tx))
    })
  }

  return {
    kind: 'embedded',
    db,
    read: (work) => transaction(readerPreamble(true, statementTimeoutMs), work),
    asReader: (work) => transaction(readerPreamble(false, statementTimeoutMs), work),
    admin: (work) => transaction('', work),
    close: () => db.close(),
  }
}
