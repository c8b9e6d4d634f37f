import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'

/**
 * Everything the topology test makes lives in one directory under the system's temporary directory,
 * and every process it starts carries that directory in the environment variable MARKER. So the
 * run can be cleaned up whatever happens to it:
 * - `close()` (the test's afterAll) stops each process gently, then kills what is left, then
 *   removes the directory;
 * - an exit handler kills what is left and removes the directory if the test process exits without
 *   `close()` (an uncaught error, Ctrl-C);
 * - a detached reaper (reaper.mjs) watches the test process and does the same if it is killed
 *   outright (SIGKILL, a CI time-out), which no handler in the process itself can catch;
 * - at start, directories of earlier runs whose owner is gone are cleaned up the same way.
 */
export const MARKER = 'OPENBOOK_TOPOLOGY_RUN'
export const PREFIX = 'openbook-topology-'
const REAPER = fileURLToPath(new URL('./reaper.mjs', import.meta.url))

export interface Identity {
  readonly uid: number
  readonly gid: number
  readonly name: string
}

/**
 * PostgreSQL and PgBouncer refuse to run as root: as root the test runs them as the `postgres`
 * user that Debian's postgresql package creates; as anyone else, as that user.
 */
export function serviceIdentity(): Identity | undefined {
  if (process.getuid?.() !== 0) return undefined
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'))
  if (!line)
    throw new Error('running as root, and there is no postgres user to run PostgreSQL and PgBouncer as')
  const [, , uid, gid] = line.split(':')
  return { uid: Number(uid), gid: Number(gid), name: 'postgres' }
}

/** Processes whose environment names `dir` in MARKER, found through /proc (Linux). */
export function markedProcesses(dir: string): number[] {
  const needle = `${MARKER}=${dir}\0`
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').includes(needle)) pids.push(Number(entry))
    } catch {
      // gone, or not ours to read
    }
  }
  return pids
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function killAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {
      // already gone
    }
  }
}

/** Kills every process of `dir` and removes it; synchronous, for exit handlers too. */
export function reapSync(dir: string): void {
  for (let round = 0; round < 20; round++) {
    const pids = markedProcesses(dir)
    if (pids.length === 0) break
    killAll(pids, 'SIGKILL')
    execFileSync('sleep', ['0.1'])
  }
  rmSync(dir, { recursive: true, force: true })
}

/** Removes what earlier runs left: directories whose owning test process no longer runs. */
export function reapStaleRuns(): string[] {
  const reaped: string[] = []
  for (const entry of readdirSync(tmpdir())) {
    if (!entry.startsWith(PREFIX)) continue
    const dir = join(tmpdir(), entry)
    let owner = 0
    try {
      owner = Number(readFileSync(join(dir, 'owner.pid'), 'utf8'))
    } catch {
      // no owner file: a run that died while starting
    }
    if (owner > 0 && alive(owner)) continue
    reapSync(dir)
    reaped.push(dir)
  }
  return reaped
}

export interface Tracked {
  readonly name: string
  readonly child: ChildProcess
  readonly log: string
  readonly exited: Promise<number | null>
  /** The last lines of its log, for failure messages. */
  tail(lines?: number): string
}

export class RunDir {
  readonly path: string
  readonly identity: Identity | undefined
  private readonly processes = new Set<Tracked>()
  private reaper: ChildProcess | undefined
  private closed = false
  private readonly onExit = () => {
    if (!this.closed) reapSync(this.path)
  }

  constructor() {
    this.identity = serviceIdentity()
    this.path = mkdtempSync(join(tmpdir(), PREFIX))
    // Services running as postgres must reach their files here.
    chmodSync(this.path, 0o755)
    writeFileSync(join(this.path, 'owner.pid'), String(process.pid))
    process.once('exit', this.onExit)
    this.reaper = spawn(process.execPath, [REAPER, this.path, String(process.pid)], {
      detached: true,
      stdio: 'ignore',
    })
    this.reaper.unref()
  }

  /** A directory inside the run, owned by the service user when there is one. */
  serviceDir(name: string, mode = 0o700): string {
    const dir = join(this.path, name)
    mkdirSync(dir, { recursive: true, mode })
    if (this.identity) chownSync(dir, this.identity.uid, this.identity.gid)
    return dir
  }

  file(name: string): string {
    return join(this.path, name)
  }

  /** Starts a process with the run's marker, its output in `<name>.log`. */
  spawn(
    name: string,
    command: string,
    args: readonly string[],
    options: { env?: NodeJS.ProcessEnv; asService?: boolean; cwd?: string } = {},
  ): Tracked {
    const log = join(this.path, `${name}.log`)
    const fd = openSync(log, 'a')
    const asService = options.asService && this.identity
    const child = spawn(command, args, {
      cwd: options.cwd ?? this.path,
      env: { ...(options.env ?? process.env), [MARKER]: this.path },
      stdio: ['ignore', fd, fd],
      ...(asService ? { uid: this.identity?.uid, gid: this.identity?.gid } : {}),
    })
    closeSync(fd)
    const exited = new Promise<number | null>((resolve) => {
      child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null)))
      child.once('error', () => resolve(-2))
    })
    const tracked: Tracked = {
      name,
      child,
      log,
      exited,
      tail: (lines = 15) => {
        if (!existsSync(log)) return ''
        return readFileSync(log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
      },
    }
    this.processes.add(tracked)
    void exited.then(() => this.processes.delete(tracked))
    return tracked
  }

  /** Runs a command to completion (marked too); rejects with its output on a non-zero exit. */
  async run(
    name: string,
    command: string,
    args: readonly string[],
    options: { env?: NodeJS.ProcessEnv; asService?: boolean; timeoutMs?: number; cwd?: string } = {},
  ): Promise<string> {
    const tracked = this.spawn(name, command, args, options)
    const timeout = sleep(options.timeoutMs ?? 60_000).then(() => 'timeout' as const)
    const code = await Promise.race([tracked.exited, timeout])
    if (code === 'timeout') {
      tracked.child.kill('SIGKILL')
      throw new Error(`${name} timed out:\n${tracked.tail()}`)
    }
    if (code !== 0) throw new Error(`${name} exited with ${code}:\n${tracked.tail()}`)
    return readFileSync(tracked.log, 'utf8')
  }

  /**
   * Stops every process (SIGTERM, then SIGKILL after `graceMs`) and removes the directory; with
   * `keepLogsIn`, copies the logs (*.log) there first.
   */
  async close(graceMs = 5_000, keepLogsIn?: string): Promise<void> {
    const running = [...this.processes]
    for (const tracked of running) tracked.child.kill('SIGTERM')
    await Promise.race([Promise.all(running.map((tracked) => tracked.exited)), sleep(graceMs)])
    if (keepLogsIn) {
      mkdirSync(keepLogsIn, { recursive: true })
      for (const entry of readdirSync(this.path))
        if (entry.endsWith('.log')) copyFileSync(join(this.path, entry), join(keepLogsIn, entry))
    }
    // Anything still marked: children the processes made (postgres backends), stragglers.
    reapSync(this.path)
    this.closed = true
    process.off('exit', this.onExit)
    if (this.reaper?.pid) killAll([this.reaper.pid], 'SIGKILL')
  }
}
