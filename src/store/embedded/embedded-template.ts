/**
 * A new embedded DATA_DIR, made in a fraction of a second: `npm run build` (and so `npm ci`)
 * creates and migrates one DATA_DIR once, `dist/embedded-template/` (scripts/build-template.js),
 * and the first start copies it instead of running PGlite's initdb and the migrations (seconds of
 * CPU and hundreds of megabytes, embedded-create.ts).
 *
 * A template is copied only when it is what this code would create: its manifest, written last,
 * records what it was made of (PGlite's version, initdb's settings, every migration's name and
 * text), and every file's size and SHA-256. A template of other code (an older release's build,
 * migrations changed since) or with a file missing, added or changed is left alone, and the
 * DATA_DIR is created as before. Copied or not, the migrations run at every open (open.ts), so no
 * DATA_DIR is served at an older schema than this release's.
 */
import { createHash } from 'node:crypto'
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { readMigrations } from '../schema/schema-version.js'
import { embeddedInitdbParams } from './embedded-settings.js'

/** Where the build writes the template: dist/embedded-template, from dist/store/embedded or src/store/embedded alike. */
export const BUILT_TEMPLATE = fileURLToPath(new URL('../../../dist/embedded-template', import.meta.url))

const MANIFEST = 'openbook-template.json'
/** Written last into a DATA_DIR: without it, the DATA_DIR is created again (embedded-worker.ts). */
export const MARKER = 'PG_VERSION'
/** Files of a DATA_DIR that are the holding process's, not the database's (data-dir-lock.ts, the operator socket). */
const NOT_COPIED = /^(openbook\.|\.s\.|postmaster\.pid$)/

interface TemplateFile {
  readonly path: string
  readonly size: number
  readonly sha256: string
}

interface Manifest {
  readonly madeOf: string
  /** Every directory, empty ones included (PostgreSQL needs pg_notify, pg_tblspc…), parents first. */
  readonly dirs: readonly string[]
  readonly files: readonly TemplateFile[]
}

/** A file of the PGlite package, by its path from the package's entry point (in its dist/). */
export function pgliteFile(path: string): string {
  return join(dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite')), path)
}

/** What a DATA_DIR made by this code is made of, as one hash: a template of anything else is not used. */
export function templateIngredients(): string {
  const { version } = JSON.parse(readFileSync(pgliteFile('../package.json'), 'utf8')) as { version: string }
  const hash = createHash('sha256')
  hash.update(`pglite ${version}\0initdb ${JSON.stringify(embeddedInitdbParams())}\0`)
  for (const migration of readMigrations()) hash.update(`${migration.name}\0${migration.sql}\0`)
  return hash.digest('hex')
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex')
}

/** The directories and files below `root`, relative to it with `/`, sorted; the holder's left out. */
function entriesOf(root: string, under = root, out = { dirs: [] as string[], files: [] as string[] }) {
  for (const entry of readdirSync(under, { withFileTypes: true }).sort((a, b) =>
    a.name < b.name ? -1 : 1,
  )) {
    if (under === root && (NOT_COPIED.test(entry.name) || entry.name === MANIFEST)) continue
    const path = join(under, entry.name)
    const name = relative(root, path).split(sep).join('/')
    if (entry.isDirectory()) {
      out.dirs.push(name)
      entriesOf(root, path, out)
    } else if (entry.isFile()) out.files.push(name)
  }
  return out
}

/**
 * Makes the DATA_DIR `dataDir` (created, migrated and closed cleanly) a template: its manifest is
 * written last, so a template whose making stopped half-way is never used.
 */
export function sealTemplate(dataDir: string): void {
  const { dirs, files } = entriesOf(dataDir)
  const manifest: Manifest = {
    madeOf: templateIngredients(),
    dirs,
    files: files.map((path) => {
      const file = join(dataDir, path)
      return { path, size: statSync(file).size, sha256: sha256(file) }
    }),
  }
  writeFileSync(join(dataDir, MANIFEST), `${JSON.stringify(manifest, null, 1)}\n`)
}

/** Why the template at `template` may not be copied, or undefined when it may. */
export function templateFault(template: string): string | undefined {
  const manifest = soundManifest(template)
  return typeof manifest === 'string' ? manifest : undefined
}

/** The template's manifest when it may be copied; otherwise why not. */
function soundManifest(template: string): Manifest | string {
  let manifest: Manifest
  try {
    manifest = JSON.parse(readFileSync(join(template, MANIFEST), 'utf8')) as Manifest
  } catch {
    return existsSync(template) ? 'it has no readable manifest' : 'there is none'
  }
  if (manifest.madeOf !== templateIngredients()) {
    return 'it was made by other code (another PGlite, initdb settings or migrations)'
  }
  if (!manifest.files.some((file) => file.path === MARKER)) return `its manifest lists no ${MARKER}`
  const paths = [...manifest.dirs, ...manifest.files.map((file) => file.path)]
  if (paths.some((path) => path.startsWith('/') || path.split('/').includes('..'))) {
    return 'its manifest names a path outside it'
  }
  for (const file of manifest.files) {
    const path = join(template, file.path)
    if (!existsSync(path)) return `${file.path} is missing`
    if (statSync(path).size !== file.size || sha256(path) !== file.sha256) {
      return `${file.path} differs from its manifest`
    }
  }
  return manifest
}

export type TemplateCopy = { readonly copied: true } | { readonly copied: false; readonly why: string }

/**
 * Copies the template into the new DATA_DIR `dataDir` when it is sound, PG_VERSION last; otherwise
 * writes nothing and says why.
 */
export function copyTemplate(template: string, dataDir: string): TemplateCopy {
  const manifest = soundManifest(template)
  if (typeof manifest === 'string') return { copied: false, why: manifest }
  for (const dir of manifest.dirs) mkdirSync(join(dataDir, dir), { recursive: true, mode: 0o700 })
  const files = manifest.files.map((file) => file.path).filter((path) => path !== MARKER)
  for (const path of [...files, MARKER]) {
    // Owner-only, as DATA_DIR is (PGlite writes a few files group- and world-readable).
    copyFileSync(join(template, path), join(dataDir, path))
    chmodSync(join(dataDir, path), 0o600)
  }
  return { copied: true }
}
