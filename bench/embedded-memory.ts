/**
 * Memory and throughput of the embedded server on the demo organization, as a new user meets it:
 * the built server (dist/server.js) starts on a fresh DATA_DIR (so it creates the database and seeds
 * the demo), then serves the customers list to 16 connections for 10 s. Prints peak RSS (VmHWM) at
 * each phase, where the memory sat at the highest sample, each thread's V8 figures, and req/s.
 *
 *   npm run build && node --import tsx bench/embedded-memory.ts [--seconds 10] [--connections 16]
 *     [--data-dir DIR (kept: a second run starts on the same database)] [--path /api/public/v1/...]
 *     [--env NAME=VALUE ...] [--server dist/server.js (another build, to compare)]
 *
 * Extra arguments after `--` go to node before dist/server.js (e.g. -- --max-semi-space-size=2).
 * The server's children are watched too: the embedded store creates a new database in one.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { httpLoad } from './load.js'
import { runFromRoot } from './paths.js'
import { cpuSeconds, freePort } from './proc.js'
import { startScriptEnv } from './servers.js'

runFromRoot()

const { values, positionals } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '16' },
    'data-dir': { type: 'string' },
    path: { type: 'string', default: '/api/public/v1/customers?limit=50' },
    env: { type: 'string', multiple: true, default: [] },
    server: { type: 'string', default: 'dist/server.js' },
  },
  allowPositionals: true,
})

const MB = 1024 * 1024

interface Mapping {
  readonly start: number
  readonly end: number
  readonly perm: string
  readonly name: string
  rssKb: number
}

function mappings(pid: number): Mapping[] {
  const out: Mapping[] = []
  let current: Mapping | undefined
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head) {
      current = {
        start: Number.parseInt(head[1] ?? '0', 16),
        end: Number.parseInt(head[2] ?? '0', 16),
        perm: head[3] ?? '',
        name: head[4] ?? '',
        rssKb: 0,
      }
      out.push(current)
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss && current) current.rssKb = Number(rss[1])
  }
  return out
}

/**
 * Resident memory by kind. A WebAssembly memory is a read-write anonymous mapping followed at once
 * by its guard region, an inaccessible reservation of gigabytes.
 */
function breakdown(pid: number): Record<string, number> {
  const maps = mappings(pid)
  const kinds: Record<string, number> = {}
  const add = (kind: string, kb: number) => {
    kinds[kind] = (kinds[kind] ?? 0) + kb / 1024
  }
  maps.forEach((map, index) => {
    const next = maps[index + 1]
    if (map.name === '' && map.perm.startsWith('rw') && next?.start === map.end && next.perm === '---p') {
      if (next.end - next.start >= 4 * 1024 * MB) {
        add(`WebAssembly memory (${Math.round((map.end - map.start) / MB)} MB)`, map.rssKb)
        return
      }
    }
    // glibc gives each thread's arena a heap of 64 MB, aligned to its size, of which it makes
    // only the part in use accessible.
    const arenaHeap = 64 * MB
    if (map.name === '' && map.start % arenaHeap === 0 && next?.start === map.end && next.perm === '---p') {
      if (next.end - map.start <= arenaHeap) {
        add('malloc, arenas of other threads', map.rssKb)
        return
      }
    }
    if (map.name.endsWith('/node')) add('node executable', map.rssKb)
    else if (map.name === '[heap]') add('malloc, main arena ([heap])', map.rssKb)
    else if (map.name.startsWith('/')) add('other files (libraries)', map.rssKb)
    else if (map.perm.includes('x')) add('anonymous, executable (compiled code)', map.rssKb)
    else add('anonymous (V8 heaps, ArrayBuffers, other)', map.rssKb)
  })
  return kinds
}

function status(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8')
    const field = (name: string) =>
      Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) / 1024
    return { rss: field('VmRSS'), hwm: field('VmHWM') }
  } catch {
    return undefined
  }
}

/** The process's children, from /proc (empty when it is gone). */
function children(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
    )
  } catch {
    return []
  }
}

/**
 * Samples RSS every 20 ms; at each new high, notes where the memory sits. Also the peak RSS of
 * each child process (the embedded store creates a new database in one), by its last sample.
 */
function watch(pid: number) {
  let peak = 0
  let atPeak: Record<string, number> = {}
  const childPeaks = new Map<number, number>()
  const timer = setInterval(() => {
    for (const child of children(pid)) {
      const hwm = status(child)?.hwm
      if (hwm) childPeaks.set(child, Math.max(hwm, childPeaks.get(child) ?? 0))
    }
    const now = status(pid)
    if (!now || now.rss < peak + 4) return
    peak = now.rss
    try {
      atPeak = breakdown(pid)
    } catch {
      // The process ended between the two reads.
    }
  }, 20)
  return {
    stop: () => clearInterval(timer),
    peak: () => ({ rss: peak, atPeak }),
    childPeaks: () => [...childPeaks.values()],
  }
}

/** Each thread's highest V8 figures, in bytes, from bench/memory-probe.mjs. */
function probes(dir: string): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {}
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.json'))) {
    out[file.replace(/\.json$/, '')] = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<
      string,
      number
    >
  }
  return out
}

const mb = (value: number) => `${Math.round(value)} MB`

async function main(): Promise<void> {
  if (!existsSync(values.server)) throw new Error(`no ${values.server}: run \`npm run build\` first`)
  const work = mkdtempSync(join(tmpdir(), 'openbook-memory-'))
  const dataDir = values['data-dir'] ? resolve(values['data-dir']) : join(work, 'data')
  const keyFile = `${dataDir}.demo-key`
  const fresh = !existsSync(dataDir)
  const probeDir = join(work, 'probe')
  rmSync(probeDir, { recursive: true, force: true })
  mkdirSync(probeDir)
  const port = await freePort()
  const loadBefore = loadavg()[0] ?? 0
  const started = performance.now()
  const child = spawn(
    process.execPath,
    ['--import', './bench/memory-probe.mjs', ...positionals, values.server],
    {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...startScriptEnv(),
        DATA_DIR: dataDir,
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        MEMORY_PROBE_DIR: probeDir,
        ...Object.fromEntries(
          values.env.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
        ),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const { pid } = child
  if (pid === undefined) throw new Error('the server did not start')
  // Watched from its first moment: creating the database and seeding happen before it listens.
  const watcher = watch(pid)
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
  })
  const exited = new Promise<void>((done) => child.on('close', () => done()))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
  }
  try {
    let key: string | undefined
    for (let attempt = 0; attempt < 600 && !key; attempt++) {
      key = /\b([a-z][a-z0-9]*_test_[0-9a-f]{64})\b/.exec(stdout)?.[1]
      if (!key && !fresh && existsSync(keyFile)) key = readFileSync(keyFile, 'utf8').trim()
      if (!key) await sleep(100)
    }
    if (!key) throw new Error('the embedded server printed no demo key')
    while (!(await accepts(port))) {
      if (child.exitCode !== null) throw new Error(`the server exited ${child.exitCode}`)
      await sleep(50)
    }
    if (fresh) writeFileSync(keyFile, key)
    const ready = performance.now()
    const startup = status(pid)
    const startupPeak = watcher.peak()
    const cpuBefore = cpuSeconds(pid) ?? 0
    const result = await httpLoad({
      url: `http://127.0.0.1:${port}${values.path}`,
      headers: { authorization: `Bearer ${key}` },
      connections: Number(values.connections),
      seconds: Number(values.seconds),
    })
    const cpu = (cpuSeconds(pid) ?? 0) - cpuBefore
    await sleep(200)
    const after = status(pid)
    const peak = watcher.peak()
    const threads = probes(probeDir)
    watcher.stop()

    console.log(
      `embedded server, ${fresh ? 'fresh DATA_DIR (creates the database, seeds the demo)' : `DATA_DIR ${dataDir}`}`,
    )
    console.log(
      `  machine: ${cpus().length} cores, load average ${loadBefore.toFixed(1)} before, ` +
        `${loadavg()[0]?.toFixed(1)} after`,
    )
    console.log(`  ready in ${((ready - started) / 1000).toFixed(1)} s`)
    console.log(
      `  peak RSS (VmHWM) when ready:    ${mb(startup?.hwm ?? 0)} (RSS then ${mb(startup?.rss ?? 0)})`,
    )
    console.log(`  peak RSS (VmHWM) after load:    ${mb(after?.hwm ?? 0)} (RSS then ${mb(after?.rss ?? 0)})`)
    console.log(
      `  load: ${values.connections} connections, ${values.seconds} s, GET ${values.path}: ` +
        `${Math.round(result.rps)} req/s, p50 ${result.p50?.toFixed(1)} ms, p99 ${result.p99?.toFixed(1)} ms, ` +
        `${result.failures} failures, server CPU ${Math.round((cpu / Number(values.seconds)) * 100)}%`,
    )
    const show = (title: string, kinds: Record<string, number>) => {
      console.log(title)
      for (const [kind, value] of Object.entries(kinds).sort((a, b) => b[1] - a[1])) {
        if (value >= 1) console.log(`    ${mb(value).padStart(7)}  ${kind}`)
      }
    }
    for (const childPeak of watcher.childPeaks()) {
      console.log(`  a child process of the server (creating the database): peak RSS ${mb(childPeak)}`)
    }
    show(`  at the highest sample before ready (${mb(startupPeak.rss)}):`, startupPeak.atPeak)
    if (peak.rss > startupPeak.rss) show(`  at the highest sample under load (${mb(peak.rss)}):`, peak.atPeak)
    console.log(
      '  V8, per thread (highest of 50 ms samples): heap used / heap total / external (WebAssembly ' +
        'memory counts at its full size) / of which ArrayBuffers',
    )
    for (const [thread, p] of Object.entries(threads)) {
      console.log(
        `    ${thread.padEnd(10)} ${mb((p.heapUsed ?? 0) / MB)} / ${mb((p.heapTotal ?? 0) / MB)} / ` +
          `${mb((p.external ?? 0) / MB)} / ${mb((p.arrayBuffers ?? 0) / MB)}`,
      )
    }
    console.log(
      `RESULT peak_rss_mb=${Math.round(after?.hwm ?? 0)} startup_peak_rss_mb=${Math.round(startup?.hwm ?? 0)} ` +
        `child_peak_rss_mb=${Math.round(Math.max(0, ...watcher.childPeaks()))} ` +
        `rps=${Math.round(result.rps)} failures=${result.failures}`,
    )
  } finally {
    watcher.stop()
    await stop()
    rmSync(work, { recursive: true, force: true })
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      done(true)
    })
    socket.once('error', () => done(false))
  })
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
