/**
 * The first start: `npm start` on a new DATA_DIR, timed from the spawn to the
 * first 200 of `GET /api/public/v1/customers?limit=2` with the key it printed, as a new user
 * meets it. Several runs one after the other, each on its own new DATA_DIR; the median and the
 * spread, the server's CPU seconds (its children's included: the initdb child, when there is no
 * template), and the machine's load average before and after.
 *
 *   npm run bench:start [-- --runs 5] [--dir PATH (another checkout's build, e.g. main's)] [--write]
 *
 * `--write` puts the table into bench/RESULTS.md between the first-start markers.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { runFromRoot } from './paths.js'
import { clockTicks, freePort, loadAverageText } from './proc.js'
import { writeResultsSection } from './report.js'

runFromRoot()

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    dir: { type: 'string', default: '.' },
    write: { type: 'boolean', default: false },
  },
})
const runs = Number(values.runs)
const dir = resolve(values.dir)

interface Run {
  /** Spawn to the key on stdout. */
  readonly keyMs: number
  /** Spawn to the first 200 with that key. */
  readonly okMs: number
  /** CPU seconds of the server and of the children it waited for. */
  readonly cpu: number
  /** How DATA_DIR was made, from the server's set-up line. */
  readonly made: string
}

/** Fields of /proc/PID/stat after the command name (which is in parentheses and may hold spaces). */
function statFields(pid: number): number[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number)
  } catch {
    return undefined
  }
}

/**
 * CPU seconds (user + system) of a live process, of its live descendants (npm runs the server in a
 * child), and of the children they have waited for (the initdb child).
 */
function treeCpu(root: number): number {
  const parents = new Map<number, number>()
  for (const name of readdirSync('/proc')) {
    const fields = /^\d+$/.test(name) ? statFields(Number(name)) : undefined
    if (fields) parents.set(Number(name), fields[1] ?? 0)
  }
  let ticks = 0
  const visit = (pid: number) => {
    const fields = statFields(pid)
    ticks += (fields?.[11] ?? 0) + (fields?.[12] ?? 0) + (fields?.[13] ?? 0) + (fields?.[14] ?? 0)
    for (const [child, parent] of parents) if (parent === pid) visit(child)
  }
  visit(root)
  return ticks / clockTicks()
}

async function firstStart(): Promise<Run> {
  const dataDir = mkdtempSync(join(tmpdir(), 'openbook-first-start-'))
  const [port, opsPort] = [await freePort(), await freePort()]
  const env = {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: String(port),
    OPS_PORT: String(opsPort),
    LOG_LEVEL: 'info',
  }
  const started = performance.now()
  const child = spawn('npm', ['start'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = new Promise<void>((done) => child.on('close', () => done()))
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
  })
  try {
    let key: string | undefined
    let keyMs = 0
    for (;;) {
      if (child.exitCode !== null) throw new Error(`npm start exited ${child.exitCode}: ${out.slice(-500)}`)
      if (performance.now() - started > 120_000) throw new Error('no working key within 120 s')
      key ??= /\b([a-z][a-z0-9]*_test_[0-9a-f]{64})\b/.exec(out)?.[1]
      if (key && !keyMs) keyMs = performance.now() - started
      if (key) {
        const status = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers?limit=2`, {
          headers: { authorization: `Bearer ${key}` },
        }).then(
          (response) => response.status,
          () => 0,
        )
        if (status === 200) break
      }
      await sleep(10)
    }
    const okMs = performance.now() - started
    const cpu = child.pid ? treeCpu(child.pid) : Number.NaN
    const made = out.includes('from the template')
      ? 'template'
      : /set-up: creating/.test(out)
        ? 'initdb'
        : 'unknown'
    return { keyMs, okMs, cpu, made }
  } finally {
    child.kill('SIGTERM')
    await Promise.race([exited, sleep(15_000).then(() => child.kill('SIGKILL'))])
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2
}
const seconds = (ms: number) => (ms / 1000).toFixed(2)
const load = loadAverageText

const loadBefore = load()
const results: Run[] = []
for (let i = 0; i < runs; i++) {
  const result = await firstStart()
  results.push(result)
  process.stderr.write(
    `run ${i + 1}/${runs}: key ${seconds(result.keyMs)} s, first 200 ${seconds(result.okMs)} s, ` +
      `${result.cpu.toFixed(2)} CPU s, DATA_DIR by ${result.made}\n`,
  )
}
const loadAfter = load()

const ok = results.map((result) => result.okMs)
const key = results.map((result) => result.keyMs)
const cpu = results.map((result) => result.cpu * 1000)
const row = (name: string, list: readonly number[]) =>
  `| ${name} | ${seconds(median(list))} | ${seconds(Math.min(...list))} | ${seconds(Math.max(...list))} |`
const table = [
  `\`npm run bench:start -- --runs ${runs}${values.dir === '.' ? '' : ` --dir ${values.dir}`}\`: ${runs} first starts of \`npm start\` on a new DATA_DIR, one after the other; ` +
    `DATA_DIR made by ${[...new Set(results.map((result) => result.made))].join(', ')}; ` +
    `${cpus().length} cores, load average (1, 5, 15 min) ${loadBefore} before, ${loadAfter} after.`,
  '',
  '| from the spawn of `npm start` to | median s | min s | max s |',
  '|---|---:|---:|---:|',
  row('the key printed', key),
  row('the first 200 with it', ok),
  row('(CPU seconds of the server and its children)', cpu),
].join('\n')
process.stdout.write(`${table}\n`)
if (values.write) writeResultsSection('first-start', `## First start\n\n${table}`)
