// The registry mirror on our build machines serves only the linux-x64 builds of packages that ship
// one binary package per platform (biome, rollup). `npm install` then leaves the other platforms out
// of package-lock.json, and `npm ci` refuses the lock as out of sync. This adds the missing entries
// back, marked optional with their os/cpu, so `npm ci` skips them here as it would anywhere else.
// Run after `npm install` changes the lock: `node scripts/lock-foreign-platforms.js`.
import { readFileSync, writeFileSync } from 'node:fs'

const lockPath = new URL('../package-lock.json', import.meta.url)
const lock = JSON.parse(readFileSync(lockPath, 'utf8'))
const packages = lock.packages

const OS = ['android', 'darwin', 'freebsd', 'linux', 'openbsd', 'openharmony', 'win32']
const CPU = ['arm64', 'x64', 'ia32', 'arm', 'loong64', 'ppc64', 'riscv64', 's390x']

function platformOf(name) {
  const parts = name.split('/').pop().split('-')
  const os = parts.find((p) => OS.includes(p))
  const cpuPart = parts.find((p) => CPU.includes(p))
  if (!os || !cpuPart) return undefined
  const entry = { os: [os], cpu: [cpuPart] }
  if (parts.includes('musl') || parts.includes('musleabihf')) entry.libc = ['musl']
  else if (os === 'linux' && (parts.includes('gnu') || parts.includes('gnueabihf'))) entry.libc = ['glibc']
  return entry
}

let added = 0
for (const meta of Object.values(packages)) {
  for (const [dep, version] of Object.entries(meta.optionalDependencies ?? {})) {
    const key = `node_modules/${dep}`
    if (packages[key]) continue
    const platform = platformOf(dep)
    if (!platform) continue
    packages[key] = { version, ...(meta.dev ? { dev: true } : {}), optional: true, ...platform }
    added++
  }
}
const sorted = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : 1)),
)
lock.packages = sorted
writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`)
console.log(`lock: added ${added} foreign-platform entries`)
