// What the server's build (dist/) is made from, and the record of the sources it was last built of.
// `npm run build` records it (`node scripts/build-inputs.js record`); `npm start` (scripts/start.js)
// compares it with the sources as they are, and builds when they differ.
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
const STAMP = join(ROOT, 'dist', '.build-inputs')

function filesUnder(dir) {
  if (!existsSync(dir)) return []
  const out = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...filesUnder(path))
    else if (entry.isFile()) out.push(path)
  }
  return out.sort()
}

/** The files whose content decides what the server's build writes to dist/. */
export function buildInputs(root = ROOT) {
  const files = filesUnder(join(root, 'src'))
  for (const name of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/copy-migrations.js']) {
    if (existsSync(join(root, name))) files.push(join(root, name))
  }
  return files
}

export function inputsHash(root = ROOT) {
  const hash = createHash('sha256')
  for (const file of buildInputs(root)) {
    hash.update(file.slice(root.length)).update('\0').update(readFileSync(file)).update('\0')
  }
  return hash.digest('hex')
}

/** Records that dist/ is of the sources whose hash is `hash`. */
export function recordBuild(hash = inputsHash()) {
  writeFileSync(STAMP, `${hash}\n`)
}

/**
 * Why dist/ is not of the current sources, or undefined when it is. Without a record (built
 * before there was one): current when every file in dist/ is newer than every input.
 */
export function staleness(hash = inputsHash()) {
  if (!existsSync(join(ROOT, 'dist', 'server.js'))) return 'dist/ is missing'
  if (existsSync(STAMP)) {
    return readFileSync(STAMP, 'utf8').trim() === hash
      ? undefined
      : 'the sources changed since dist/ was built'
  }
  const outputs = filesUnder(join(ROOT, 'dist'))
  const oldestOutput = Math.min(...outputs.map((file) => statSync(file).mtimeMs))
  const newestInput = Math.max(...buildInputs().map((file) => statSync(file).mtimeMs))
  return newestInput < oldestOutput ? undefined : 'the sources are newer than dist/'
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === 'record') recordBuild()
