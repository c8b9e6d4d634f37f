import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ImportError } from '../../src/import/errors.js'
import { mergeStaged } from '../../src/import/merge.js'
import { failureReason } from '../../src/operator-error.js'
import { EmbeddedOpenError, explainOpenFailure } from '../../src/store/open-failure.js'
import type { AdminSql } from '../../src/store/types.js'

const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})
function storeDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'openbook-unit-'))
  dirs.push(dir)
  writeFileSync(join(dir, 'PG_VERSION'), '17\n')
  return dir
}

const MB = 1024 * 1024
const pgliteFailed = new Error('PGlite failed to initialize properly')

describe('why the embedded store could not be opened, in words', () => {
  it('a full disk: said by the error, or PGlite failing with little space left', () => {
    const dir = storeDir()
    const enospc = new Error(
      `creating the embedded database in ${dir} failed: Error: ENOSPC: no space left on device, write`,
    )
    for (const [error, free] of [
      [enospc, 0],
      [pgliteFailed, 1.5 * MB],
      [new Error('Aborted(). Build with -sASSERTIONS for more info.'), 0.2 * MB],
    ] as const) {
      const explained = explainOpenFailure(dir, error, free)
      expect(explained).toBeInstanceOf(EmbeddedOpenError)
      expect((explained as Error).message).toMatch(
        new RegExp(
          `^disk full in DATA_DIR \\(${dir}: [\\d.]+ (MB|kB) free\\): free space on its file system and try again$`,
        ),
      )
    }
  })

  it('PGlite failing with room to spare on an existing store: corrupted, restore it or move it aside', () => {
    const dir = storeDir()
    const explained = explainOpenFailure(
      dir,
      new Error('Aborted(). Build with -sASSERTIONS for more info.'),
      10_000 * MB,
    )
    expect((explained as Error).message).toBe(
      `the embedded store in DATA_DIR (${dir}) is corrupted: PGlite cannot start on its files (Aborted(). Build with -sASSERTIONS for more info.). ` +
        `Restore DATA_DIR from a backup, or move it aside (mv ${dir} ${dir}.corrupted) and start again with a new, empty store`,
    )
  })

  it('anything else is left as it is', () => {
    const other = new Error('DATA_DIR ./data is in use by `openbook import` (pid 4242)')
    expect(explainOpenFailure(storeDir(), other, 1 * MB)).toBe(other)
  })
})

describe('a database out of disk space during a command', () => {
  const failing = (code: string): AdminSql => {
    const error = Object.assign(new Error('could not extend file "base/5/16805": No space left on device'), {
      code,
    })
    return { query: async () => [], exec: () => Promise.reject(error), copyIn: async () => {} }
  }

  it('an import says so, not that the database rejected the records', async () => {
    const error = await mergeStaged(failing('53100'), ['customer'], 25_000, new Set()).catch(
      (e: unknown) => e,
    )
    expect(error).not.toBeInstanceOf(ImportError)
    expect(failureReason(error)).toBe(
      "the database's disk is full (53100); nothing of this command was written: free space on its disk (PostgreSQL's data directory, or DATA_DIR for the embedded store) and run it again; running servers recover by themselves once there is room",
    )
  })

  it('records the database rejects are still named by their lines', async () => {
    const error = await mergeStaged(failing('23514'), ['customer'], 25_000, new Set()).catch(
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(ImportError)
    expect((error as Error).message).toBe('lines up to 25000: customer rejected by the database (23514)')
  })
})
