// dist/ of the current sources, for `npm start` (scripts/start.js) and `openbook`
// (bin/openbook.js): missing or older than the sources (a `git pull`, an edit), it is built
// first; a build that cannot be made is refused in one line, never a stack trace. Processes that
// start at once (a script running several commands) build it once: one builds, the others wait
// for it and find dist/ current. OPENBOOK_BUILD=never runs dist/ as it is: for a deployment built
// elsewhere, and for the tests, whose set-up built it for the whole run.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { inputsHash, ROOT, recordBuild, staleness } from './build-inputs.js'

const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
const LOCK = join(ROOT, 'node_modules', '.cache', 'openbook-build.lock')
/** A build lock older than this was left by a process that died: taken over. */
const LOCK_STALE_MS = 5 * 60_000

function refuse(reason) {
  process.stderr.write(`openbook: ${reason}\n`)
  process.exit(1)
}

/** Runs node with `args` in the root; resolves to its output when it fails. */
function node(args) {
  const result = spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 16 << 20 })
  if (result.status === 0) return undefined
  return `${result.stdout ?? ''}\n${result.stderr ?? ''}\n${result.error?.message ?? ''}`
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** Takes the build lock (an atomic mkdir), waiting while another process builds. */
function lock() {
  mkdirSync(join(LOCK, '..'), { recursive: true })
  for (;;) {
    try {
      mkdirSync(LOCK)
      return
    } catch (error) {
      if (error.code !== 'EEXIST') throw error
      let age = 0
      try {
        age = Date.now() - statSync(LOCK).mtimeMs
      } catch {
        continue
      }
      if (age > LOCK_STALE_MS) rmSync(LOCK, { recursive: true, force: true })
      else sleep(200)
    }
  }
}

/** Builds dist/; returns why it could not, or undefined. */
function build(why, hash) {
  process.stderr.write(`openbook: ${why}: building it (tsc -p tsconfig.build.json)\n`)
  const failed = node([TSC, '-p', 'tsconfig.build.json']) ?? node(['scripts/copy-migrations.js'])
  if (failed === undefined) {
    recordBuild(hash)
    return undefined
  }
  const first = failed
    .split('\n')
    .map((line) => line.trim())
    .find((line) => /error/i.test(line))
  return `cannot build dist/ from the sources: ${first ?? 'the build failed'}; fix it, or run npm run build to see every error`
}

/** Returns once dist/ is of the current sources (building it when it is not), or exits 1 saying why not. */
export function ensureCurrentDist() {
  const mode = process.env.OPENBOOK_BUILD || 'auto'
  if (mode !== 'auto' && mode !== 'never') refuse(`OPENBOOK_BUILD must be auto or never, not ${mode}`)
  if (mode === 'never') {
    if (!existsSync(join(ROOT, 'dist', 'server.js')))
      refuse('dist/ is missing, and OPENBOOK_BUILD=never: build it first')
    return
  }
  let hash = inputsHash()
  let why = staleness(hash)
  if (!why) return
  if (!existsSync(TSC)) {
    refuse(
      `${why}, and it cannot be built here: TypeScript is not installed (npm ci installs it; or build elsewhere with npm run build)`,
    )
  }
  lock()
  let failure
  try {
    // Another process may have built it while this one waited.
    hash = inputsHash()
    why = staleness(hash)
    if (why) failure = build(why, hash)
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
  if (failure) refuse(failure)
}
