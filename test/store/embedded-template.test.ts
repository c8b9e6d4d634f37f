import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import type { DataDirOrigin } from '../../src/store/embedded/embedded-protocol.js'
import { BUILT_TEMPLATE, copyTemplate, templateFault } from '../../src/store/embedded/embedded-template.js'
import { openStore } from '../../src/store/open.js'
import { LATEST_VERSION, schemaState } from '../../src/store/schema/migrate.js'
import { scratchRoot } from '../helpers/process.js'

/**
 * The template of a new embedded DATA_DIR (src/store/embedded/embedded-template.ts): the build makes it,
 * a first start copies it, and one that is not exactly what this code would make (changed, cut
 * short, of other migrations) is never copied: DATA_DIR is then made by initdb, as without one.
 */
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})
function scratch(): string {
  const dir = mkdtempSync(join(scratchRoot(), 'openbook-test-template-'))
  dirs.push(dir)
  return dir
}

/** A copy of the build's template, to spoil. */
function templateCopy(): string {
  const dir = join(scratch(), 'template')
  cpSync(BUILT_TEMPLATE, dir, { recursive: true })
  return dir
}

const MANIFEST = 'openbook-template.json'
const manifestOf = (template: string) =>
  JSON.parse(readFileSync(join(template, MANIFEST), 'utf8')) as {
    madeOf: string
    dirs: string[]
    files: { path: string; size: number }[]
  }

/** Every file below `dir`, relative. */
function filesBelow(dir: string, under = dir): string[] {
  return readdirSync(under, { withFileTypes: true }).flatMap((entry) => {
    const path = join(under, entry.name)
    return entry.isDirectory() ? filesBelow(dir, path) : [path.slice(dir.length + 1)]
  })
}

async function open(dataDir: string, template: string | false) {
  let origin: DataDirOrigin | undefined
  const store = await openStore(
    { databaseUrl: undefined, dataDir, dataDirTemplate: template },
    { shortLived: true, onDataDirOpened: (told) => (origin = told) },
  )
  try {
    return { origin, state: await schemaState(store) }
  } finally {
    await store.close()
  }
}

describe('the embedded DATA_DIR template', () => {
  it('the build made one, of this code; a new DATA_DIR is a copy of it, owner-only, at the current schema', async () => {
    expect(templateFault(BUILT_TEMPLATE)).toBeUndefined()
    const dataDir = join(scratch(), 'data')
    const { origin, state } = await open(dataDir, BUILT_TEMPLATE)
    expect(origin).toEqual({ made: 'template' })
    expect(state.version).toBe(LATEST_VERSION)
    // The build's own lock and holder files are not copied; the manifest stays with the template.
    const files = filesBelow(dataDir)
    expect(files.filter((file) => /openbook\.holder|openbook-template/.test(file))).toEqual([])
    expect(statSync(dataDir).mode & 0o077).toBe(0)
    // Copied owner-only (PGlite itself later rewrites pg_internal.init readable by all, inside DATA_DIR's 0700).
    const copy = join(scratch(), 'copy')
    expect(copyTemplate(BUILT_TEMPLATE, copy)).toEqual({ copied: true })
    for (const file of filesBelow(copy)) expect(statSync(join(copy, file)).mode & 0o077, file).toBe(0)
    // Opened again: as it was.
    expect((await open(dataDir, BUILT_TEMPLATE)).origin).toEqual({ made: 'no' })
  }, 60_000)

  it.each([
    [
      'a file changed',
      (template: string) => {
        const file = manifestOf(template).files.find(
          (entry) => entry.path.startsWith('base/') && entry.size > 0,
        )
        const path = join(template, file?.path ?? '')
        const bytes = readFileSync(path)
        const at = Math.floor(bytes.length / 2)
        bytes[at] = (bytes[at] ?? 0) ^ 0xff
        writeFileSync(path, bytes)
      },
      /^base\/.* differs from its manifest$/,
    ],
    [
      'a file missing',
      (template: string) => rmSync(join(template, 'global', 'pg_control')),
      /^global\/pg_control is missing$/,
    ],
    [
      'made of other migrations (an older build)',
      (template: string) => {
        const manifest = manifestOf(template)
        writeFileSync(join(template, MANIFEST), JSON.stringify({ ...manifest, madeOf: '0'.repeat(64) }))
      },
      /made by other code/,
    ],
    [
      'cut short (no manifest: it is written last)',
      (template: string) => rmSync(join(template, MANIFEST)),
      /no readable manifest/,
    ],
    [
      'a path outside it',
      (template: string) => {
        const manifest = manifestOf(template)
        writeFileSync(
          join(template, MANIFEST),
          JSON.stringify({ ...manifest, dirs: [...manifest.dirs, '../x'] }),
        )
      },
      /outside/,
    ],
  ])('%s: not copied, and nothing written', (_, spoil, why) => {
    const template = templateCopy()
    spoil(template)
    const dataDir = join(scratch(), 'data')
    const copy = copyTemplate(template, dataDir)
    expect(copy.copied).toBe(false)
    expect(copy.copied ? '' : copy.why).toMatch(why)
    expect(existsSync(dataDir)).toBe(false)
  })

  it('a spoiled template: the DATA_DIR is made by initdb instead, says why, and is migrated', async () => {
    const template = templateCopy()
    rmSync(join(template, 'PG_VERSION'))
    const dataDir = join(scratch(), 'data')
    const { origin, state } = await open(dataDir, template)
    expect(origin).toEqual({ made: 'initdb', templateUnused: 'PG_VERSION is missing' })
    expect(state.version).toBe(LATEST_VERSION)
  }, 180_000)
})
