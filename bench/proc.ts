import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createServer, Socket } from 'node:net'
import { loadavg } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'

/** A TCP port on loopback that was free a moment ago (the system picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

export interface RunResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
}

export interface RunOptions {
  readonly env?: NodeJS.ProcessEnv
  readonly timeoutMs?: number
  /** Echo the child's stderr (progress, warnings) to ours as it comes. */
  readonly echoStderr?: boolean
}

const running = new Set<ChildProcess>()

/** Spawns a child that `killAll` knows of and collects what it writes on stdout and stderr. */
function spawnCollecting(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  onStderr: (chunk: string) => void = () => {},
): { child: ChildProcess; stdout: () => string; stderr: () => string } {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
  running.add(child)
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
  })
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
    onStderr(chunk)
  })
  return { child, stdout: () => stdout, stderr: () => stderr }
}

/** Runs a command to its end (or its time-out), collecting its output. */
export function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const { child, stdout, stderr } = spawnCollecting(command, args, options.env ?? process.env, (chunk) => {
      if (options.echoStderr) process.stderr.write(chunk)
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000)
    child.on('error', (error) => {
      clearTimeout(timer)
      running.delete(child)
      reject(error)
    })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      running.delete(child)
      resolve({
        code: code ?? (signal ? 128 : 1),
        stdout: stdout(),
        stderr: stderr(),
        ms: performance.now() - started,
      })
    })
  })
}

/** Like run, but a non-zero exit is an error that carries the command's last line of stderr. */
export async function runOk(
  command: string,
  args: readonly string[],
  options?: RunOptions,
): Promise<RunResult> {
  const result = await run(command, args, options)
  if (result.code !== 0) {
    const reason = result.stderr.trim().split('\n').pop() ?? ''
    throw new Error(`${command} ${args.slice(0, 3).join(' ')} exited ${result.code}: ${reason}`)
  }
  return result
}

export interface Service {
  readonly pid: number
  readonly port: number
  /** Everything the process wrote on stdout so far. */
  stdout(): string
  /** The last line the process wrote on stderr, if it has exited; undefined while it runs. */
  exitReason(): string | undefined
  stop(): Promise<void>
}

/** Starts a long-running server and waits until its port accepts connections. */
export async function startService(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  port: number,
  timeoutMs = 30_000,
): Promise<Service> {
  const { child, stdout: out, stderr: err } = spawnCollecting(command, args, env)
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const killed = await Promise.race([exited.then(() => false), sleep(12_000).then(() => true)])
      if (killed) child.kill('SIGKILL')
      await exited
    }
    running.delete(child)
  }
  for (let attempt = 0; attempt < timeoutMs / 100; attempt++) {
    if (child.exitCode !== null) {
      running.delete(child)
      throw new Error(
        `${command} ${args.join(' ')} exited ${child.exitCode}: ${err().trim().split('\n').pop()}`,
      )
    }
    if (await accepts(port)) {
      if (child.pid === undefined) throw new Error(`${command} has no pid`)
      const exitReason = () =>
        child.exitCode === null && child.signalCode === null
          ? undefined
          : `exited ${child.exitCode ?? child.signalCode}: ${(err().trim() || out().trim()).split('\n').slice(-3).join(' | ')}`
      return { pid: child.pid, port, stdout: out, exitReason, stop }
    }
    await sleep(100)
  }
  await stop()
  throw new Error(`${command} ${args.join(' ')} did not listen on ${port} within ${timeoutMs / 1000} s`)
}

/**
 * Whether a server listens on `port`. A probe whose own ephemeral port happens to be `port` connects
 * to itself (TCP's simultaneous open on loopback) with nobody listening: that is not an answer.
 */
export function accepts(port: number, localPort?: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket()
    socket.once('connect', () => {
      const self = socket.localPort === port
      socket.destroy()
      resolve(!self)
    })
    socket.once('error', () => resolve(false))
    socket.connect({
      port,
      host: '127.0.0.1',
      ...(localPort ? { localPort, localAddress: '127.0.0.1' } : {}),
    })
  })
}

/** Kills children still running (on an error or Ctrl-C): each by its own pid. */
export function killAll(): void {
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  running.clear()
}

let ticksPerSecond: number | undefined

export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    } catch {
      ticksPerSecond = 100
    }
  }
  return ticksPerSecond
}

/**
 * CPU seconds a process has used so far, to the nanosecond: the time each of its threads ran
 * (/proc/<pid>/task/<tid>/schedstat), summed. /proc/<pid>/stat counts in clock ticks (10 ms), which a
 * PostgreSQL backend serving 100 requests a second crosses a few times a second: per-request
 * figures of a slow target were off by up to a fifth. Falls back to /proc/<pid>/stat; undefined when
 * the process is gone.
 */
export function cpuSeconds(pid: number): number | undefined {
  try {
    let nanoseconds = 0
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      nanoseconds += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
    }
    if (Number.isFinite(nanoseconds) && nanoseconds > 0) return nanoseconds / 1e9
  } catch {
    // No schedstat (or the process is gone): its stat, or nothing.
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / clockTicks()
  } catch {
    return undefined
  }
}

/** CPU seconds of this process and of its children already waited for (pgbench runs). */
export function ownCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / clockTicks()
}

/** CPU seconds all cores of the machine have been busy (not idle, not waiting for I/O). */
export function machineBusySeconds(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? ''
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number)
  return (
    ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) / clockTicks()
  )
}

/** A field of /proc/<pid>/status in kB (VmRSS, VmHWM); 0 when the process is gone. */
export function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)
    return match ? Number(match[1]) : 0
  } catch {
    return 0
  }
}

/** The machine's load average over 1, 5 and 15 minutes, as text: `1.04 0.90 0.46`. */
export function loadAverageText(): string {
  return loadavg()
    .map((value) => value.toFixed(2))
    .join(' ')
}
