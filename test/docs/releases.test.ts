import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/process.js'

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, stdio: 'pipe' }).toString().trim()
const changelog = readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8')
const headings = [...changelog.matchAll(/^## (\d+\.\d+\.\d+) \((.*)\)$/gm)].map((m) => ({
  version: m[1] ?? '',
  note: m[2] ?? '',
}))
/** scripts/releases.txt: a tag and its commit a line (scripts/release-tags.js makes the tags). */
const releases = () =>
  readFileSync(join(ROOT, 'scripts', 'releases.txt'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .map((line) => {
      const [tag = '', commit = ''] = line.trim().split(/\s+/)
      return { tag, commit }
    })
const packageVersion = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version

/** The releases are named: a tag and a CHANGELOG entry each, and the working tree's version ahead of them. */
describe('releases', () => {
  const tags = git('tag', '--merged', 'HEAD', '--list', 'v[0-9]*')
    .split('\n')
    .filter((tag) => /^v\d+\.\d+\.\d+$/.test(tag))

  it('every release of scripts/releases.txt is an annotated tag on its commit, the two users run among them', () => {
    const listed = releases()
    expect(listed.map((release) => release.tag)).toEqual(expect.arrayContaining(['v1.0.0', 'v1.1.0']))
    for (const { tag, commit } of listed) {
      expect(tags, `${tag} is missing: run node scripts/release-tags.js`).toContain(tag)
      expect(git('rev-parse', `${tag}^{commit}`), tag).toBe(commit)
    }
    for (const tag of tags) expect(git('cat-file', '-t', tag), tag).toBe('tag')
  })

  it('every release tag has its CHANGELOG entry, which names the tag and the package version', () => {
    for (const tag of tags) {
      const entry = headings.find((heading) => `v${heading.version}` === tag)
      expect(entry, `CHANGELOG.md has no "## ${tag.slice(1)} (tag ${tag}; package version …)"`).toBeDefined()
      expect(entry?.note).toMatch(
        new RegExp(`^tag ${tag.replaceAll('.', '\\.')}; package version \\d+\\.\\d+\\.\\d+$`),
      )
    }
  })

  it("the newest entry is the working tree's package version, newer than every tag", () => {
    const [newest] = headings
    const base = packageVersion.replace(/-.*$/, '')
    expect(newest?.version).toBe(base)
    if (packageVersion !== base) expect(newest?.note).toBe(`unreleased; package version ${packageVersion}`)
    const numeric = (v: string) => v.split('.').map(Number) as [number, number, number]
    const newer = (a: string, b: string) => {
      const [x, y] = [numeric(a), numeric(b)]
      return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]
    }
    for (const tag of tags) {
      if (git('rev-parse', `${tag}^{commit}`) === git('rev-parse', 'HEAD')) continue
      expect(newer(base, tag.slice(1)), `${packageVersion} after ${tag}`).toBeGreaterThan(0)
    }
  })
})

/** The schema the working tree's migrations make: the highest number, and the oldest release number that serves it. */
function migrationsSchema(): { version: number; compatibleFrom: number } {
  const directory = join(ROOT, 'src', 'store', 'migrations')
  const files = readdirSync(directory).filter((name) => /^\d{3}_.*\.sql$/.test(name))
  const version = Math.max(...files.map((name) => Number(name.slice(0, 3))))
  const compatibleFrom = Math.max(
    ...files.map((name) => {
      const header = /^-- compatible-from: (\d+)$/m.exec(readFileSync(join(directory, name), 'utf8'))
      return header ? Number(header[1]) : 0
    }),
  )
  return { version, compatibleFrom }
}

/** An operator reads the schema version of a release in the CHANGELOG and in upgrading.md: both are the migrations'. */
describe('the schema version the release notes give', () => {
  const schema = migrationsSchema()
  const [newest] = headings
  const entry = changelog.slice(changelog.indexOf(`## ${newest?.version} (`)).split(/\n## /)[0] ?? ''

  it("is the newest CHANGELOG entry's, with the compatibility the migrations declare", () => {
    const said = /^Schema version (\d+) \(compatible from (\d+)/m.exec(entry)
    expect(
      said,
      `the newest CHANGELOG entry says "Schema version ${schema.version} (compatible from …"`,
    ).not.toBeNull()
    expect(Number(said?.[1])).toBe(schema.version)
    expect(Number(said?.[2])).toBe(schema.compatibleFrom)
  })

  const upgrading = readFileSync(join(ROOT, 'docs', 'operators', 'upgrading.md'), 'utf8')

  it("is upgrading.md's heading for the newest release", () => {
    const heading = new RegExp(
      `^## To ${newest?.version.replaceAll('.', '\\.')} \\(schema (\\d+)\\)$`,
      'm',
    ).exec(upgrading)
    expect(heading, `upgrading.md has "## To ${newest?.version} (schema ${schema.version})"`).not.toBeNull()
    expect(Number(heading?.[1])).toBe(schema.version)
  })

  it("says in upgrading.md when the newest release's migrate counts the lists again from the rows", () => {
    // The schema the release before it made: its migrations are the ones after that.
    const previous =
      changelog.slice(changelog.indexOf(`## ${headings[1]?.version} (`)).split(/\n## /)[0] ?? ''
    const since = Number(/^Schema version (\d+)/m.exec(previous)?.[1])
    expect(since, `the CHANGELOG entry of ${headings[1]?.version} gives its schema version`).toBeGreaterThan(
      0,
    )
    const directory = join(ROOT, 'src', 'store', 'migrations')
    const rebuilding = readdirSync(directory).filter(
      (name) =>
        /^\d{3}_.*\.sql$/.test(name) &&
        Number(name.slice(0, 3)) > since &&
        /\blist_rebuild\(/.test(readFileSync(join(directory, name), 'utf8')),
    )
    const section = upgrading.slice(upgrading.indexOf(`## To ${newest?.version} (`)).split(/\n## /)[0] ?? ''
    // The operator plans for it: the salon software's writes wait meanwhile.
    if (rebuilding.length > 0)
      expect(
        section,
        `${rebuilding.join(', ')} count the lists again: upgrading.md's "## To ${newest?.version}" says "rebuilds the list counts from the rows"`,
      ).toMatch(/rebuilds the list counts from the rows/)
    else expect(section).not.toMatch(/rebuilds the list counts from the rows/)
  })
})
