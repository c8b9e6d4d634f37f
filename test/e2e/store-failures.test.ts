import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { syntheticLines } from '../../bench/synthetic-lines.js'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { openbook } from '../cli/run.js'
import { cleanEnv, start } from '../helpers/process.js'
import { migratedDataDir } from '../helpers/stores.js'

/** A store that cannot be used says why in one line, with what to do: real binaries, real PGlite. */
const removals: (() => void)[] = []
afterAll(() => {
  for (const remove of removals.reverse()) remove()
})

function oneLine(output: string): string {
  const lines = output.trim().split('\n')
  expect(lines, output).toHaveLength(1)
  expect(output).not.toMatch(/\n\s+at /)
  return lines[0] ?? ''
}

describe('a corrupted embedded store', () => {
  it(
    'the CLI and the server say it is corrupted, and to restore it or move it aside',
    async () => {
      const { dir, remove } = migratedDataDir()
      removals.push(remove)
      // The control file garbled, as a crash of the disk or a bad copy leaves it.
      writeFileSync(join(dir, 'global', 'pg_control'), Buffer.alloc(8192, 0x5a))
      const expected =
        `the embedded store in DATA_DIR (${dir}) is corrupted: PGlite cannot start on its files (` +
        `PGlite failed to initialize properly). Restore DATA_DIR from a backup, or move it aside (mv ${dir} ${dir}.corrupted) ` +
        'and start again with a new, empty store'

      const command = await openbook(['orgs', 'list'], { DATA_DIR: dir })
      expect(command.code).toBe(1)
      expect(oneLine(command.stderr)).toBe(`openbook: ${expected}`)

      const server = start('node', ['dist/server.js'], cleanEnv({ DATA_DIR: dir, PORT: '0' }))
      expect(await server.exited()).toBe(1)
      expect(oneLine(server.output())).toBe(`openbook: cannot open the store: ${expected}`)
    },
    patience(60_000),
  )
})

/** A small file system of its own (tmpfs), where the test may fill the disk; undefined where mounting is not allowed. */
function smallFileSystem(megabytes: number): string | undefined {
  const mountPoint = mkdtempSync(join(tmpdir(), 'openbook-full-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m`, 'tmpfs', mountPoint], {
      stdio: 'ignore',
    })
  } catch {
    rmSync(mountPoint, { recursive: true, force: true })
    return undefined
  }
  removals.push(() => {
    execFileSync('umount', [mountPoint], { stdio: 'ignore' })
    rmSync(mountPoint, { recursive: true, force: true })
  })
  return mountPoint
}

/** Fills the file system of `dir` until `leftBytes` are free. */
function fill(dir: string, leftBytes: number): void {
  const free = Number(
    execFileSync('df', ['-B1', '--output=avail', dir], { encoding: 'utf8' }).trim().split('\n')[1],
  )
  execFileSync('fallocate', ['-l', String(free - leftBytes), join(dir, 'filler')])
}

describe('a full disk under the embedded store', () => {
  it(
    "an import says the database's disk is full (53100), and a start on that disk says disk full in DATA_DIR",
    async (context) => {
      const mountPoint = smallFileSystem(60)
      // Mounting needs root (CI's container has it); elsewhere this case cannot be made.
      if (!mountPoint) return context.skip()
      const dir = join(mountPoint, 'data')
      cpSync(inject('embeddedTemplate'), dir, { recursive: true })
      fill(mountPoint, 6 * 1024 * 1024)
      const file = join(mkdtempSync(join(tmpdir(), 'openbook-full-input-')), 'big.ndjson')
      removals.push(() => rmSync(join(file, '..'), { recursive: true, force: true }))
      writeFileSync(file, `${[...syntheticLines(40_000, 3)].map((l) => l.line).join('\n')}\n`)

      const imported = await openbook(['import', file], { DATA_DIR: dir })
      expect(imported.code).toBe(1)
      expect(oneLine(imported.stderr)).toBe(
        "openbook: the database's disk is full (53100); nothing of this command was written: " +
          "free space on its disk (PostgreSQL's data directory, or DATA_DIR for the embedded store) and run it again; " +
          'running servers recover by themselves once there is room',
      )

      const server = start('node', ['dist/server.js'], cleanEnv({ DATA_DIR: dir, PORT: '0' }))
      expect(await server.exited()).toBe(1)
      expect(oneLine(server.output())).toMatch(
        new RegExp(
          `^openbook: cannot open the store: disk full in DATA_DIR \\(${dir}: [\\d.]+ MB free\\): free space on its file system and try again$`,
        ),
      )
    },
    patience(120_000),
  )
})
