// The schema as the migrations leave it, in one file a reader can open: src/store/schema/current.sql.
// `npm run docs` writes it from a database it migrates; test/store/current-schema.test.ts fails
// while the committed file differs from what the migrations produce. Tables, indexes, functions,
// triggers, policies and grants, as `pg_dump --schema-only` writes them, without owners (the
// owner's name is the operator's) and without the lines that differ from one dump to the next.
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import pg from 'pg'
import { createPostgresStore } from '../src/store/postgres/postgres.js'
import { migrate } from '../src/store/schema/migrate.js'

export const CURRENT_SCHEMA_PATH = resolve(
  dirname(fileURLToPath(import.meta.url)),
  '../src/store/schema/current.sql',
)

const HEADER = `-- The schema as openbook's migrations leave it (src/store/migrations), for reading: what each
-- function, trigger, table, policy and grant is today. Written by \`npm run docs\` from a migrated
-- PostgreSQL database; a test fails while it differs from what the migrations produce. Never run
-- it: \`openbook migrate\` builds the schema.
`

/** pg_dump's text without what varies between dumps of the same schema: versions, `\\restrict` keys. */
export function normalizeDump(dump: string): string {
  const lines = dump
    .split('\n')
    .filter((line) => !/^-- Dumped (from|by) /.test(line) && !/^\\(un)?restrict /.test(line))
  return `${HEADER}${lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()}\n`
}

const pgDump = async (url: string, ...options: string[]) =>
  (
    await promisify(execFile)('pg_dump', [...options, '--no-owner', '--dbname', url], {
      maxBuffer: 64 * 1024 * 1024,
    })
  ).stdout

/**
 * The schema of the database at `url`, as current.sql holds it, with the rows of
 * `list_definitions`: they describe the lists that the functions keep.
 */
export async function dumpSchema(url: string): Promise<string> {
  const schema = await pgDump(url, '--schema-only')
  const definitions = await pgDump(url, '--data-only', '--inserts', '--table=public.list_definitions')
  return normalizeDump(`${schema}
${definitions}`)
}

async function admin(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/** Migrates a new database on the server of `adminUrl`, writes its schema to current.sql, drops it. */
export async function writeCurrentSchema(adminUrl: string): Promise<string> {
  const name = `openbook_schema_${randomBytes(4).toString('hex')}`
  await admin(adminUrl, `CREATE DATABASE ${name}`)
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  try {
    const store = createPostgresStore({ connectionString: url.toString(), maxConnections: 1 })
    try {
      await migrate(store)
    } finally {
      await store.close()
    }
    writeFileSync(CURRENT_SCHEMA_PATH, await dumpSchema(url.toString()))
    return CURRENT_SCHEMA_PATH
  } finally {
    await admin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  }
}
