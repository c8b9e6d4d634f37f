// `npm start`: the server of the current sources. dist/ missing or older than the sources (a
// `git pull` since the last build) is built first; a build that cannot be made is refused in one
// line, never a stack trace. The server then runs in this very process, so that the signals sent
// to `npm start` (which execs this script) reach it.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { inputsHash, ROOT, recordBuild, staleness } from './build-inputs.js'

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

const hash = inputsHash()
const why = staleness(hash)
if (why) {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
  if (!existsSync(tsc)) {
    refuse(
      `${why}, and it cannot be built here: TypeScript is not installed (npm ci installs it; or build elsewhere with npm run build)`,
    )
  }
  process.stderr.write(`openbook: ${why}: building it (tsc -p tsconfig.build.json)\n`)
  const failed = node([tsc, '-p', 'tsconfig.build.json']) ?? node(['scripts/copy-migrations.js'])
  if (failed !== undefined) {
    const first = failed
      .split('\n')
      .map((line) => line.trim())
      .find((line) => /error/i.test(line))
    refuse(
      `cannot build dist/ from the sources: ${first ?? 'the build failed'}; fix it, or run npm run build to see every error`,
    )
  }
  recordBuild(hash)
}

await import(pathToFileURL(join(ROOT, 'dist', 'server.js')).href)
