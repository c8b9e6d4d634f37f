// The product docs (README, SECURITY.md, docs/, the client's README) as a newcomer reads them:
// every relative link and anchor resolves, the README stays a short guide, every dependency says
// why it is there, and no doc carries the notes of a run (issue numbers, commit hashes, run times,
// load averages): history lives in git, figures in bench/RESULTS.md.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

function filesUnder(dir: string, extensions: readonly string[]): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory())
      return entry.name === 'node_modules' || entry.name === 'dist' ? [] : filesUnder(path, extensions)
    return extensions.some((extension) => entry.name.endsWith(extension)) ? [path] : []
  })
}
const markdownUnder = (dir: string) => filesUnder(dir, ['.md'])

/** The shipped code and its comments (migrations included), the benchmark's and the tests'. */
const PRODUCT_CODE = [
  ...filesUnder(join(ROOT, 'src'), ['.ts', '.sql', '.md']),
  ...filesUnder(join(ROOT, 'scripts'), ['.ts', '.js']),
  ...filesUnder(join(ROOT, 'packages/client/src'), ['.ts']),
  ...filesUnder(join(ROOT, 'bench'), ['.ts', '.mjs', '.sh']),
  join(ROOT, 'bench/README.md'),
  // The tests are read as the code they hold to: their comments too (this file names an example).
  ...filesUnder(join(ROOT, 'test'), ['.ts']).filter((file) => !file.endsWith('links.test.ts')),
  ...filesUnder(join(ROOT, 'packages/client/test'), ['.ts']),
]

/** The product docs: what a reader of the repository is sent to. */
const PRODUCT_DOCS = [
  join(ROOT, 'README.md'),
  join(ROOT, 'SECURITY.md'),
  join(ROOT, 'packages/client/README.md'),
  ...markdownUnder(join(ROOT, 'docs')),
]
/** Docs whose links must resolve too (RESULTS may name commits and times: it records runs). */
const LINKED_DOCS = [...PRODUCT_DOCS, join(ROOT, 'bench/RESULTS.md'), join(ROOT, 'bench/README.md')]

const name = (file: string) => relative(ROOT, file)
const read = (file: string) => readFileSync(file, 'utf8')

/** Markdown without its fenced code blocks and inline code, where links are not links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '')
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** The anchors a Markdown file offers: one per heading, repeats numbered as GitHub does. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading ?? '')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    out.add(count === 0 ? base : `${base}-${count}`)
  }
  return out
}

/** Every relative link of a Markdown file: [text](target), without external URLs and mail. */
function relativeLinks(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((match) => match[1] ?? '')
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
}

/** What a link does not resolve to, in words; undefined when it resolves. */
function brokenLink(from: string, target: string): string | undefined {
  const [path = '', anchor] = target.split('#')
  const file = path === '' ? from : resolve(dirname(from), decodeURIComponent(path))
  if (!existsSync(file)) return `${target}: no such file`
  if (anchor === undefined || anchor === '') return undefined
  if (statSync(file).isDirectory() || !file.endsWith('.md'))
    return `${target}: an anchor into a non-Markdown file`
  return anchors(read(file)).has(anchor) ? undefined : `${target}: no heading makes #${anchor}`
}

/** The notes of a run that a product doc must not carry, found in `text`. */
function runNotes(text: string): string[] {
  const found: string[] = []
  for (const match of text.matchAll(/\bissues? #?\d+/gi)) found.push(match[0])
  for (const match of text.matchAll(/\bload averages?\b/gi)) found.push(match[0])
  for (const match of text.matchAll(
    /\b(?:\d{4}-\d{2}-\d{2}[ T])?\d{1,2}:\d{2}(?::\d{2})?(?: ?[-–] ?\d{1,2}:\d{2}(?::\d{2})?)? ?UTC\b/g,
  ))
    found.push(match[0])
  // A commit hash: 7 to 40 hex digits with a digit and a letter. A citation of another
  // repository's commit (its URL or owner/name just before) is a reference, not a note.
  for (const match of text.matchAll(/\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b/g)) {
    const before = text.slice(Math.max(0, (match.index ?? 0) - 200), match.index)
    if (!/https?:\/\/|`[\w.-]+\/[\w.-]+`/.test(before)) found.push(match[0])
  }
  return found
}

/** Generated, not committed: `npm run docs` writes it. */
const GENERATED = new Set(['docs/api.html'])

/**
 * The repository paths a doc names in code spans (`src/…`, `test/…`, …) that do not exist,
 * leaving out globs, generated files and the paths of another repository that the doc cites (its
 * URL shortly before).
 */
function missingPaths(file: string, markdown: string): string[] {
  const missing: string[] = []
  for (const match of markdown.matchAll(/`((?:src|test|bench|scripts|packages|docs|bin)\/[^`\s]*)`/g)) {
    const path = (match[1] ?? '').replace(/[:(].*$/, '').replace(/\/$/, '')
    if (path.includes('*') || GENERATED.has(path)) continue
    const before = markdown.slice(Math.max(0, (match.index ?? 0) - 600), match.index)
    if (/https?:\/\//.test(before)) continue
    const candidates = [join(ROOT, path), join(dirname(file), path)]
    if (!candidates.some(existsSync)) missing.push(path)
  }
  return missing
}

describe('the product docs', () => {
  it('every relative link and anchor resolves', () => {
    const broken = LINKED_DOCS.filter(existsSync).flatMap((file) =>
      relativeLinks(read(file))
        .map((target) => brokenLink(file, target))
        .filter((problem) => problem !== undefined)
        .map((problem) => `${name(file)}: ${problem}`),
    )
    expect(broken).toEqual([])
  })

  it('every file or folder of the repository they name exists', () => {
    const missing = PRODUCT_DOCS.flatMap((file) =>
      missingPaths(file, read(file)).map((path) => `${name(file)}: ${path}`),
    )
    expect(missing).toEqual([])
  })

  it('the README is a guide of at most 250 lines, with short lines', () => {
    const readme = read(join(ROOT, 'README.md'))
    expect(readme.split('\n').length).toBeLessThanOrEqual(250)
    const long = readme.split('\n').filter((line) => [...line].length > 120)
    expect(long).toEqual([])
  })

  it('the README links to a page for each audience and to the decisions', () => {
    const links = relativeLinks(read(join(ROOT, 'README.md')))
    for (const page of [
      'docs/integrators/README.md',
      'docs/operators/configuration.md',
      'docs/contributing.md',
      'docs/design/decisions.md',
      'docs/design/dependencies.md',
      'bench/RESULTS.md',
    ])
      expect(links).toContain(page)
  })

  it('carry no issue numbers, commit hashes, run times or load averages', () => {
    const notes = PRODUCT_DOCS.flatMap((file) => runNotes(read(file)).map((note) => `${name(file)}: ${note}`))
    expect(notes).toEqual([])
  })

  it('nor does the code: no issue numbers in comments, migrations included', () => {
    const notes = PRODUCT_CODE.flatMap((file) =>
      [...read(file).matchAll(/\bissues? #?\d+/gi)].map((match) => `${name(file)}: ${match[0]}`),
    )
    expect(notes).toEqual([])
  })

  it('say why each dependency is there', () => {
    const pkg = JSON.parse(read(join(ROOT, 'package.json'))) as Record<string, Record<string, string>>
    const why = read(join(ROOT, 'docs/design/dependencies.md'))
    const names = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})]
    expect(names.filter((dependency) => !why.includes(`\`${dependency}\``))).toEqual([])
  })
})

describe('runNotes', () => {
  it('finds what a run leaves in a text, and passes what a doc says', () => {
    expect(runNotes('fixed in issue 33 at `fe495b8`, 2026-11-27 08:59-09:02 UTC, load average 6')).toEqual([
      'issue 33',
      'load average',
      '2026-11-27 08:59-09:02 UTC',
      'fe495b8',
    ])
    expect(runNotes('startDate=2026-01-01T00:00:00Z, 1,000,000 rows, deadbeef-free, ISO 3166-1')).toEqual([])
    expect(runNotes('Citus, https://github.com/citusdata/citus (commit a3d5708)')).toEqual([])
  })
})
