/**
 * npm run bench:import-against -- --tag v1.0.0 --lines 50000,200000: `openbook import` of this
 * tree against a release, alternating in one run on the same file at each size: into a freshly
 * migrated database (a first load), then the same file again into the loaded one. Each build
 * imports into its own database, migrated by its own `migrate`.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { writeNdjson } from './ndjson.js'
import { assertLoopbackUrl } from './options.js'
import { runFromRoot } from './paths.js'
import { runOk } from './proc.js'
import { writeResultsSection } from './report.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    tag: { type: 'string', default: 'v1.0.0' },
    lines: { type: 'string', default: '300000' },
    rounds: { type: 'string', default: '2' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432' },
    'no-write': { type: 'boolean', default: false },
  },
})
assertLoopbackUrl(values.pg)
const SERVER = values.pg.replace(/\/+$/, '')
const SIZES = values.lines.split(',').map(Number)
const ROUNDS = Number(values.rounds)
const log = (line: string) => process.stderr.write(`${line}\n`)
const workDir = mkdtempSync(join(tmpdir(), 'openbook-import-against-'))

/** A worktree of the release, built as `npm ci` builds it (its node_modules: this tree's). */
function buildRelease(tag: string): { root: string; remove: () => void } {
  const root = join(workDir, tag)
  execFileSync('git', ['worktree', 'add', '--detach', '--force', root, tag], { stdio: 'pipe' })
  symlinkSync(resolve('node_modules'), join(root, 'node_modules'), 'dir')
  execFileSync(process.execPath, [resolve('node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'pipe',
  })
  execFileSync(process.execPath, ['scripts/copy-migrations.js'], { cwd: root, stdio: 'pipe' })
  return {
    root,
    remove: () => {
      execFileSync('git', ['worktree', 'remove', '--force', root], { stdio: 'pipe' })
    },
  }
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: `${SERVER}/postgres` })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

interface Build {
  readonly name: string
  readonly root: string
  readonly db: string
}

/** The build's `openbook` (its dist/ as built), with the database of its own. */
async function openbook(build: Build, args: string[]): Promise<number> {
  const started = performance.now()
  await runOk(process.execPath, [join(build.root, 'dist/cli/index.js'), ...args], {
    env: { ...process.env, DATABASE_URL: `${SERVER}/${build.db}`, OPENBOOK_BUILD: 'never' },
    timeoutMs: 30 * 60_000,
  })
  return (performance.now() - started) / 1000
}

async function importBoth(build: Build, file: string): Promise<{ first: number; again: number }> {
  await admin(`DROP DATABASE IF EXISTS ${build.db} WITH (FORCE)`)
  await admin(`CREATE DATABASE ${build.db}`)
  await openbook(build, ['migrate'])
  // Each import starts with no dirty pages left by the one before (its own or the other build's),
  // so that no build pays for the other's writes in a checkpoint.
  await admin('CHECKPOINT')
  const first = await openbook(build, ['import', file, '--json'])
  await admin('CHECKPOINT')
  const again = await openbook(build, ['import', file, '--json'])
  return { first, again }
}

log('building this tree (npm run build) and the release')
await runOk('npm', ['run', 'build'], { timeoutMs: 300_000 })
const release = buildRelease(values.tag)
const median = (list: number[]) => {
  const sorted = [...list].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}
const builds: Build[] = [
  { name: 'this tree', root: resolve('.'), db: 'openbook_bench_import_tree' },
  { name: values.tag, root: release.root, db: 'openbook_bench_import_release' },
]
const [tree, old] = builds as [Build, Build]

/** Both builds' imports of one file of `lines` lines, alternating: a row per kind of import. */
async function compareAt(lines: number): Promise<{ rows: string[]; rounds: string }> {
  const file = join(workDir, 'import.ndjson')
  const written = await writeNdjson(file, lines, 11)
  log(`wrote ${written.lines} lines (${Math.round(written.bytes / 2 ** 20)} MB)`)
  const times = new Map(builds.map((build) => [build.name, [] as { first: number; again: number }[]]))
  for (let round = 0; round < ROUNDS; round++) {
    // The order swapped every round.
    for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
      const result = await importBoth(build, file)
      times.get(build.name)?.push(result)
      log(
        `${lines} lines, round ${round + 1}, ${build.name}: ${result.first.toFixed(1)} s, again ${result.again.toFixed(1)} s`,
      )
    }
  }
  const of = (build: Build, kind: 'first' | 'again') =>
    median((times.get(build.name) ?? []).map((t) => t[kind]))
  const row = (kind: 'first' | 'again', label: string) =>
    `| ${lines.toLocaleString('en')} | ${label} | ${of(tree, kind).toFixed(1)} s | ${of(old, kind).toFixed(1)} s | ${(of(tree, kind) / of(old, kind)).toFixed(2)} |`
  const firsts = (build: Build) => (times.get(build.name) ?? []).map((t) => t.first)
  const rounds = firsts(tree)
    .map((time, i) => `${time.toFixed(1)} / ${(firsts(old)[i] ?? 0).toFixed(1)}`)
    .join(', ')
  return { rows: [row('first', 'into an empty database'), row('again', 'the same file again')], rounds }
}

try {
  const results: { lines: number; rows: string[]; rounds: string }[] = []
  for (const lines of SIZES) results.push({ lines, ...(await compareAt(lines)) })
  for (const build of builds) await admin(`DROP DATABASE IF EXISTS ${build.db} WITH (FORCE)`)
  const report = [
    '## Import against a release',
    '',
    `Command: \`npm run bench:import-against -- --tag ${values.tag} --lines ${values.lines} --rounds ${ROUNDS}\`: at each size, the same ` +
      "file (the seed generator's), imported by each build into its own freshly migrated " +
      'database, then once more into the loaded one, each after a CHECKPOINT; the builds alternate, the order swapped every round; medians of the rounds, ' +
      'wall time of the command.',
    '',
    `| Lines | Import | this tree | ${values.tag} | × |`,
    '|--:|---|--:|--:|--:|',
    ...results.flatMap((result) => result.rows),
    '',
    'Rounds, first load (this tree / release, seconds):',
    '',
    ...results.map((result) => `- ${result.lines.toLocaleString('en')} lines: ${result.rounds}`),
  ].join('\n')
  process.stdout.write(`${report}\n`)
  if (!values['no-write']) writeResultsSection('import-against', report)
} finally {
  release.remove()
  if (existsSync(workDir)) rmSync(workDir, { recursive: true, force: true })
}
