import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { cleanEnv, freePort, type RunningProcess, scratchRoot, start } from '../helpers/process.js'

/**
 * A signal during the first start's set-up (creating DATA_DIR: PGlite's initdb in a child
 * process, 10 to 30 s, when there is no template to copy): one line says what was cancelled, the child ends with its parent, and the
 * next start begins again. Real binaries, a new DATA_DIR each.
 */
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})
function newDataDir(): string {
  const parent = mkdtempSync(join(scratchRoot(), 'openbook-first-'))
  dirs.push(parent)
  return join(parent, 'data')
}

/** Pids of the processes whose parent is `pid` and whose command line contains `text` (Linux /proc). */
function childrenOf(pid: number, text: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text))
        found.push(Number(entry))
    } catch {
      // Gone meanwhile.
    }
  }
  return found
}

/**
 * The pid of the child that creates DATA_DIR, once it is in PGlite's initdb: it has used a second
 * of CPU (starting Node and loading PGlite take less), and it reads no input for seconds at a time.
 */
async function creatingChild(server: RunningProcess): Promise<number> {
  const pid = server.child.pid as number
  for (;;) {
    const [child] = childrenOf(pid, 'embedded-create')
    if (child && (cpuSeconds(child) ?? 0) >= 1) return child
    if (server.child.exitCode !== null) throw new Error(`the server exited:\n${server.output()}`)
    await sleep(20)
  }
}

/** CPU seconds `pid` has used so far (utime + stime, in clock ticks of 1/100 s), or undefined once it is gone. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (fields[0] === 'Z') return undefined
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return undefined
  }
}

/**
 * Resolves, once `pid` has ended, to the CPU seconds it used from now on. PGlite's initdb needs
 * seconds of CPU: a child that went on with it after its parent's end used them; one that ended
 * with its parent used a fraction of a second, however loaded the machine (CPU time, not wall time).
 */
async function cpuUntilEnded(pid: number): Promise<number> {
  const first = cpuSeconds(pid) ?? 0
  let last = first
  for (;;) {
    const now = cpuSeconds(pid)
    if (now === undefined) return last - first
    last = now
    await sleep(20)
  }
}

/** A first start without the build's template (DATA_DIR_TEMPLATE=none): PGlite's initdb, in a child. */
function firstStart(dataDir: string, port: number): RunningProcess {
  return start(
    'node',
    ['dist/server.js'],
    cleanEnv({ DATA_DIR: dataDir, PORT: String(port), DATA_DIR_TEMPLATE: 'none' }),
  )
}

describe('a signal during the first start', () => {
  it.each(['SIGHUP', 'SIGTERM', 'SIGINT'] as const)(
    '%s while DATA_DIR is created: one line says what was cancelled, exit 0, the child ends too',
    async (signal) => {
      const dataDir = newDataDir()
      const server = firstStart(dataDir, await freePort())
      const child = await creatingChild(server)
      server.child.kill(signal)
      const childCpu = cpuUntilEnded(child)
      expect(await server.exited(), server.output()).toBe(0)
      const lines = server
        .output()
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { level: number; msg: string })
      expect(lines.at(-1)).toMatchObject({
        level: 40,
        msg: `interrupted by ${signal} during set-up: creating the embedded store in DATA_DIR (${dataDir}) was cancelled; nothing was served, and the next start begins it again`,
      })
      expect(await childCpu).toBeLessThan(1.5)
      expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(false)
    },
    60_000,
  )

  it(
    'kill -9 of the server while DATA_DIR is created: the child ends with it, and the next start begins again and serves',
    async () => {
      const dataDir = newDataDir()
      const port = await freePort()
      const killed = firstStart(dataDir, port)
      const child = await creatingChild(killed)
      killed.child.kill('SIGKILL')
      const childCpu = cpuUntilEnded(child)
      await killed.exited()
      expect(await childCpu).toBeLessThan(1.5)
      expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(false)

      const again = firstStart(dataDir, port)
      try {
        // A whole first start: PGlite's initdb and the demo, up to minutes beside other tests on 2 cores.
        await again.waitFor(/Try:/, 230_000)
        await again.waitFor(/Server listening/)
        expect((await fetch(`http://127.0.0.1:${port}/openapi.json`)).status).toBe(200)
      } finally {
        again.child.kill('SIGTERM')
      }
      expect(await again.exited(), again.output()).toBe(0)
    },
    patience(300_000),
  )
})
