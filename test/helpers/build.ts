import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { ROOT } from './process.js'

/**
 * The tests that run the binaries (`node dist/server.js`, `bin/openbook.js`, the client's
 * `openbook-sync`) run what the build made. So that they never test a stale build, the global
 * set-up calls `ensureBuild()`: it hashes every input of the build and builds when the hash differs
 * from the one recorded at the last build it made or found current (or when an output is missing).
 * Up to date, it costs a hash of a few hundred kilobytes. It builds as `npm run build` does, so
 * `npm test` does not run that first.
 */
const STAMP = join(ROOT, 'dist', '.test-build-inputs')

/** Every file below `dir`, recursively, sorted; dist and node_modules left out unless `all`. */
function filesUnder(dir: string, options: { all?: boolean } = {}): string[] {
  if (!existsSync(dir)) return []
  const out: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!options.all && (entry.name === 'node_modules' || entry.name === 'dist')) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...filesUnder(path, options))
    else if (entry.isFile()) out.push(path)
  }
  return out.sort()
}

/** The workspace packages' folders (package.json `workspaces`, `dir/*` patterns or plain folders). */
function workspaces(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { workspaces?: string[] }
  return (pkg.workspaces ?? []).flatMap((pattern) => {
    if (!pattern.endsWith('/*')) return [join(ROOT, pattern)]
    const parent = join(ROOT, pattern.slice(0, -2))
    if (!existsSync(parent)) return []
    return readdirSync(parent, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(parent, entry.name))
  })
}

/** The files whose content decides what `npm run build` writes. */
function buildInputs(): string[] {
  const roots = [ROOT, ...workspaces()]
  const files: string[] = []
  for (const root of roots) {
    files.push(...filesUnder(join(root, 'src')))
    for (const name of readdirSync(root)) {
      if (/^(package\.json|tsconfig.*\.json)$/.test(name)) files.push(join(root, name))
    }
  }
  files.push(...filesUnder(join(ROOT, 'scripts')))
  return files
}

/** A hash of every input of the build: the sources, the migrations, the scripts, the configs. */
export function inputsHash(): string {
  const hash = createHash('sha256')
  for (const file of buildInputs()) {
    hash.update(file.slice(ROOT.length)).update('\0').update(readFileSync(file)).update('\0')
  }
  return hash.digest('hex')
}

/** The outputs the tests spawn: the root's entry points and the dist/ of each workspace that builds. */
function outputsPresent(): boolean {
  const root = ['dist/server.js', 'dist/cli/index.js'].every((path) => existsSync(join(ROOT, path)))
  return (
    root &&
    workspaces().every(
      (dir) => !existsSync(join(dir, 'tsconfig.build.json')) || existsSync(join(dir, 'dist')),
    )
  )
}

const run = promisify(execFile)

/**
 * tsc of one project. Type errors do not stop it (exit 2: the JavaScript is written all the same),
 * as they do not stop the tests that import src/ through vitest: `npm run typecheck`, in `npm test`
 * before the tests, is where they fail. Anything else (exit 1: nothing written) does.
 */
async function compile(project: string): Promise<string | undefined> {
  try {
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project], {
      cwd: ROOT,
      maxBuffer: 16 << 20,
    })
    return undefined
  } catch (error) {
    const { code, stdout } = error as { code?: number; stdout?: string }
    if (code === 2) return `${project}: built with type errors (npm run typecheck lists them)`
    throw new Error(
      `tsc -p ${project} failed; the tests that run dist/ cannot run:\n${stdout ?? String(error)}`,
    )
  }
}

/**
 * What `npm run build` does, leniently (see compile): each tsconfig.build.json (the root's and each
 * workspace's, side by side), then the migrations beside the compiled store code, and the template
 * of a new embedded DATA_DIR.
 */
async function build(): Promise<void> {
  const projects = [ROOT, ...workspaces()]
    .map((dir) => join(dir, 'tsconfig.build.json'))
    .filter((project) => existsSync(project))
  const warnings = await Promise.all(projects.map(compile))
  await run(process.execPath, ['scripts/copy-migrations.js'], { cwd: ROOT })
  // The template of a new embedded DATA_DIR, which the first-start tests expect (kept when current).
  await run(process.execPath, ['scripts/build-template.js'], { cwd: ROOT })
  for (const warning of warnings) if (warning) process.stderr.write(`test set-up: ${warning}\n`)
}

/**
 * Without a record of its own (a fresh clone after `npm ci`, whose `prepare` built, or a `npm run
 * build` after a clean): the build is taken as current when every file it wrote is newer than
 * every input. tsc rewrites all its outputs each time, so a file left from a source since removed
 * makes it build once more.
 */
function builtAfterEveryInput(): boolean {
  const dists = [ROOT, ...workspaces()].map((dir) => join(dir, 'dist')).filter((dir) => existsSync(dir))
  const outputs = dists.flatMap((dir) => filesUnder(dir, { all: true })).filter((file) => file !== STAMP)
  const oldestOutput = Math.min(...outputs.map((file) => statSync(file).mtimeMs))
  const newestInput = Math.max(...buildInputs().map((file) => statSync(file).mtimeMs))
  return outputs.length > 0 && newestInput < oldestOutput
}

/** Builds dist/ unless it is of the current sources. */
export async function ensureBuild(): Promise<'up to date' | 'built'> {
  const before = inputsHash()
  if (outputsPresent()) {
    if (existsSync(STAMP) ? readFileSync(STAMP, 'utf8') === before : builtAfterEveryInput()) {
      writeFileSync(STAMP, before)
      await recordForNpmStart()
      return 'up to date'
    }
  }
  process.stderr.write('test set-up: dist/ is not of the current sources; building it\n')
  await build()
  // The hash of the sources as they were when the build began: an edit made since rebuilds next time.
  writeFileSync(STAMP, before)
  await recordForNpmStart()
  return 'built'
}

/** `npm start` (scripts/start.js) keeps a record of its own: without it, it would build dist/ again under the tests. */
async function recordForNpmStart(): Promise<void> {
  await run(process.execPath, ['scripts/build-inputs.js', 'record'], { cwd: ROOT })
}
