import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { ROOT } from './process.js'

/**
 * The tests that run the binaries (`node dist/server.js`, `bin/openbook.js`, the client's
 * `openbook-sync`) run what `npm run build` made. So that they never test a stale build, the global
 * set-up calls `ensureBuild()`: it hashes every input of the build and runs `npm run build` when the
 * hash differs from the one recorded by the last build it made (or when an output is missing).
 * Up to date, it costs a hash of a few hundred kilobytes.
 */
const STAMP = join(ROOT, 'dist', '.test-build-inputs')

/** Every file below `dir`, recursively, sorted (dist and node_modules excluded). */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return []
  const out: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...filesUnder(path))
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

function inputsHash(): string {
  const hash = createHash('sha256')
  for (const file of buildInputs()) {
    hash.update(file.slice(ROOT.length)).update('\0').update(readFileSync(file)).update('\0')
  }
  return hash.digest('hex')
}

/** The outputs the tests spawn: the root's entry points and each built workspace's dist. */
function outputsPresent(): boolean {
  const root = ['dist/server.js', 'dist/cli/index.js'].every((path) => existsSync(join(ROOT, path)))
  const packages = workspaces().every((dir) => {
    const pkg = join(dir, 'package.json')
    if (!existsSync(pkg)) return true
    const scripts = (JSON.parse(readFileSync(pkg, 'utf8')) as { scripts?: Record<string, string> }).scripts
    return !scripts?.build || (existsSync(join(dir, 'dist')) && statSync(join(dir, 'dist')).isDirectory())
  })
  return root && packages
}

/** Runs `npm run build` unless the last build this made is of the current sources. */
export async function ensureBuild(): Promise<'up to date' | 'built'> {
  const before = inputsHash()
  if (outputsPresent() && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === before) return 'up to date'
  process.stderr.write('test set-up: the build is not of the current sources; running npm run build\n')
  try {
    await promisify(execFile)('npm', ['run', '--silent', 'build'], { cwd: ROOT, maxBuffer: 16 << 20 })
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string }
    throw new Error(
      `npm run build failed; the tests that run dist/ cannot run:\n${stdout ?? ''}${stderr ?? ''}`,
    )
  }
  // The hash of the sources as they were when the build began: an edit made since rebuilds next time.
  writeFileSync(STAMP, before)
  return 'built'
}
