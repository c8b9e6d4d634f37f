import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { EMBEDDED_SETTINGS } from '../../src/store/embedded/embedded-settings.js'
import type { Store } from '../../src/store/types.js'

/**
 * The embedded store is sized for a small machine (src/store/embedded/embedded-settings.ts): these fail if
 * its PostgreSQL runs with a server's memory settings again. bench/embedded-memory.ts measures
 * what they are worth.
 */
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'openbook-embedded-memory-'))
  dirs.push(dir)
  return join(dir, 'data')
}

async function settings(store: Store): Promise<Record<string, string>> {
  const rows = await store.admin((sql) =>
    sql.query<{ name: string; setting: string }>(
      `SELECT name, current_setting(name) AS setting FROM pg_settings
        WHERE name = ANY($1::text[]) OR name = 'shared_memory_size'`,
      [[...Object.keys(EMBEDDED_SETTINGS)]],
    ),
  )
  return Object.fromEntries(rows.map((row) => [row.name, row.setting]))
}

async function withStore<T>(dir: string, work: (store: Store) => Promise<T>): Promise<T> {
  const store = await createEmbeddedStore(dir, { command: 'embedded-memory test' })
  try {
    return await work(store)
  } finally {
    await store.close()
  }
}

describe('the embedded store runs PostgreSQL with small memory settings', () => {
  it(
    'in memory',
    async () => {
      expect(await withStore('memory://', settings)).toMatchObject(EMBEDDED_SETTINGS)
    },
    patience(60_000),
  )

  it(
    'in a DATA_DIR: created in a child process, private to its owner, set at every start',
    async () => {
      const dir = dataDir()
      const found = await withStore(dir, settings)
      expect(found).toMatchObject(EMBEDDED_SETTINGS)
      // All of PostgreSQL's shared memory, the buffers included: 145MB with PGlite's defaults.
      expect(Number.parseInt(found.shared_memory_size ?? '', 10)).toBeLessThanOrEqual(32)
      // initdb wrote them to postgresql.conf as well.
      const conf = join(dir, 'postgresql.conf')
      expect(readFileSync(conf, 'utf8')).toMatch(/^shared_buffers = 16MB/m)
      expect(statSync(join(dir, 'PG_VERSION')).mode & 0o777).toBe(0o600)
      expect(statSync(join(dir, 'base')).mode & 0o777).toBe(0o700)

      // A DATA_DIR made before these settings (PGlite's initdb wrote its own): overridden at start.
      writeFileSync(conf, `${readFileSync(conf, 'utf8')}\nshared_buffers = 128MB\nmax_connections = 100\n`)
      expect(await withStore(dir, settings)).toMatchObject(EMBEDDED_SETTINGS)
    },
    patience(120_000),
  )

  it(
    'creates a DATA_DIR again that a creation left unfinished (no PG_VERSION)',
    async () => {
      const dir = dataDir()
      mkdirSync(join(dir, 'global'), { recursive: true })
      writeFileSync(join(dir, 'postgresql.conf'), 'half written')
      const rows = await withStore(dir, (store) => store.admin((sql) => sql.query('SELECT 1 AS one')))
      expect(rows).toEqual([{ one: 1 }])
      expect(existsSync(join(dir, 'global', 'pg_control'))).toBe(true)
    },
    patience(120_000),
  )
})
