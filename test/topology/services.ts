import { chownSync, readFileSync, writeFileSync } from 'node:fs'
import { createConnection } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { ROOT } from '../helpers/process.js'
import type { RunDir, Tracked } from './run-dir.js'

export const API_PASSWORD = 'topology-api-secret'
export const ADMIN_PASSWORD = 'topology-admin-secret'

/** Whether something accepts TCP connections on 127.0.0.1:port. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

async function until(
  what: string,
  check: () => Promise<boolean>,
  ms: number,
  tracked?: Tracked,
): Promise<void> {
  const deadline = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (tracked && tracked.child.exitCode !== null)
      throw new Error(`${tracked.name} exited while waiting for ${what}:\n${tracked.tail()}`)
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${tracked ? `:\n${tracked.tail()}` : ''}`)
    await sleep(50)
  }
}

/** Replaces every ${NAME} outside comments (;) of a reference file; refuses a name it has no value for. */
export function render(template: string, values: Readonly<Record<string, string | number>>): string {
  return template
    .split('\n')
    .map((line) =>
      line.trimStart().startsWith(';')
        ? line
        : line.replace(/\$\{([A-Z_0-9]+)\}/g, (_, name: string) => {
            const value = values[name]
            if (value === undefined)
              throw new Error(`no value for \${${name}} in the reference configuration`)
            return String(value)
          }),
    )
    .join('\n')
}

export class PgBouncer {
  process: Tracked | undefined
  private starts = 0
  readonly config: string

  constructor(
    private readonly run: RunDir,
    readonly port: number,
    primaryPort: number,
    replicaPort: number,
  ) {
    const dir = run.serviceDir('pgbouncer', 0o755)
    const authFile = run.file('pgbouncer/userlist.txt')
    writeFileSync(authFile, `"openbook_api" "${API_PASSWORD}"\n"pgbouncer_admin" "${ADMIN_PASSWORD}"\n`, {
      mode: 0o600,
    })
    this.config = run.file('pgbouncer/pgbouncer.conf')
    writeFileSync(
      this.config,
      render(readFileSync(`${ROOT}docs/topology/pgbouncer.conf`, 'utf8'), {
        LISTEN_ADDR: '127.0.0.1',
        LISTEN_PORT: port,
        PRIMARY_HOST: '127.0.0.1',
        PRIMARY_PORT: primaryPort,
        REPLICA_HOST: '127.0.0.1',
        REPLICA_PORT: replicaPort,
        RUN_DIR: dir,
        AUTH_FILE: authFile,
      }),
    )
    if (run.identity) {
      chownSync(authFile, run.identity.uid, run.identity.gid)
      chownSync(this.config, run.identity.uid, run.identity.gid)
    }
  }

  url(database: string): string {
    return `postgres://openbook_api:${API_PASSWORD}@127.0.0.1:${this.port}/${database}`
  }

  async start(): Promise<void> {
    this.starts++
    this.process = this.run.spawn(`pgbouncer-${this.starts}`, '/usr/sbin/pgbouncer', [this.config], {
      asService: true,
    })
    await until('PgBouncer to listen', () => accepts(this.port), 10_000, this.process)
  }

  /**
   * Failover: the `openbook` database now on `port` (the promoted replica), the reference
   * configuration rendered again and loaded with RELOAD, as an operator does; or, with
   * `openbook_replica`, the replica built afterwards.
   */
  async repoint(port: number, database: 'openbook' | 'openbook_replica' = 'openbook'): Promise<void> {
    const line = new RegExp(`^${database} = host=(\\S+) port=\\d+`, 'm')
    const before = readFileSync(this.config, 'utf8')
    if (!line.test(before)) throw new Error(`no ${database} line in ${this.config}`)
    writeFileSync(
      this.config,
      before.replace(line, (_, host: string) => `${database} = host=${host} port=${port}`),
    )
    await this.admin('RELOAD')
  }

  /** SIGTERM: PgBouncer 1.18's immediate shutdown (every client and server connection is closed). */
  async stop(): Promise<void> {
    const running = this.process
    if (!running) return
    running.child.kill('SIGTERM')
    await running.exited
    this.process = undefined
  }

  /**
   * PgBouncer's online restart (`pgbouncer -R`, 1.18): a new process takes the listening socket and
   * every client and server connection over from the running one through its Unix socket, and the
   * old one exits. Resolves once the old process has exited; the new one serves from then on.
   */
  async onlineRestart(): Promise<void> {
    const old = this.process
    this.starts++
    this.process = this.run.spawn(`pgbouncer-${this.starts}`, '/usr/sbin/pgbouncer', ['-R', this.config], {
      asService: true,
    })
    const exited = await Promise.race([old?.exited, sleep(15_000).then(() => 'timeout' as const)])
    if (exited === 'timeout')
      throw new Error(`the old PgBouncer did not hand over in 15 s:\n${this.process.tail()}`)
    if (this.process.child.exitCode !== null)
      throw new Error(`the new PgBouncer exited (${this.process.child.exitCode}):\n${this.process.tail()}`)
  }

  /** A statement on the admin console (SHOW STATS, SHOW POOLS): simple protocol only. */
  async admin<Row extends object>(text: string): Promise<Row[]> {
    const client = new pg.Client({
      connectionString: `postgres://pgbouncer_admin:${ADMIN_PASSWORD}@127.0.0.1:${this.port}/pgbouncer`,
      connectionTimeoutMillis: 2_000,
    })
    client.on('error', () => {})
    await client.connect()
    try {
      return (await client.query<Row>(text)).rows
    } finally {
      await client.end().catch(() => {})
    }
  }

  /** Transactions served so far per PgBouncer database (SHOW STATS). */
  async transactions(): Promise<Record<string, number>> {
    const rows = await this.admin<{ database: string; total_xact_count: string }>('SHOW STATS')
    return Object.fromEntries(rows.map((row) => [row.database, Number(row.total_xact_count)]))
  }
}

export interface InstanceSettings {
  /** The checkout whose dist/server.js runs (ROOT, or the previous release's worktree). */
  release: string
  readonly databaseUrl: string
  readonly readUrl: string | undefined
  readonly shutdownDelayMs: number
  /** DATABASE_PREPARED_STATEMENTS, or `default`: left unset (on). */
  preparedStatements: 'pooler' | 'default'
}

/** One `node dist/server.js`, on ports that stay its own across restarts (the LB names them). */
export class Instance {
  process: Tracked | undefined
  private starts = 0

  constructor(
    private readonly run: RunDir,
    readonly name: string,
    readonly port: number,
    readonly opsPort: number,
    private readonly settings: InstanceSettings,
  ) {}

  get pid(): number | undefined {
    return this.process?.child.pid
  }

  async start(): Promise<void> {
    this.starts++
    const env: NodeJS.ProcessEnv = { ...process.env }
    for (const name of [
      'DATA_DIR',
      'API_KEY_BRAND',
      'DATABASE_READ_URL',
      'DATABASE_READ_MAX_LAG_MS',
      'DATABASE_PREPARED_STATEMENTS',
    ])
      delete env[name]
    Object.assign(env, {
      PORT: String(this.port),
      HOST: '127.0.0.1',
      OPS_PORT: String(this.opsPort),
      OPS_HOST: '127.0.0.1',
      DATABASE_URL: this.settings.databaseUrl,
      SHUTDOWN_DELAY_MS: String(this.settings.shutdownDelayMs),
      LOG_LEVEL: 'warn',
      // PgBouncer in transaction mode: a client's transactions land on any server connection.
      ...(this.settings.preparedStatements === 'default'
        ? {}
        : { DATABASE_PREPARED_STATEMENTS: this.settings.preparedStatements }),
      ...(this.settings.readUrl ? { DATABASE_READ_URL: this.settings.readUrl } : {}),
    })
    this.process = this.run.spawn(`${this.name}-${this.starts}`, process.execPath, ['dist/server.js'], {
      env,
      cwd: this.settings.release,
    })
    await until(`${this.name} to be ready`, async () => (await this.ready()) === 200, 20_000, this.process)
  }

  /** The status of /readyz, or 0 when nothing answers. */
  async ready(): Promise<number> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.opsPort}/readyz`, {
        signal: AbortSignal.timeout(3_000),
      })
      await response.arrayBuffer()
      return response.status
    } catch {
      return 0
    }
  }

  async metrics(): Promise<string> {
    const response = await fetch(`http://127.0.0.1:${this.opsPort}/metrics`, {
      signal: AbortSignal.timeout(3_000),
    })
    return response.text()
  }

  /** The sum of a metric's samples whose labels contain `labels` (Prometheus text). */
  async metric(name: string, labels = ''): Promise<number> {
    let sum = 0
    for (const line of (await this.metrics()).split('\n')) {
      if (!line.startsWith(name) || line.startsWith('#')) continue
      const rest = line.slice(name.length)
      if (!(rest.startsWith('{') || rest.startsWith(' '))) continue
      if (labels && !rest.includes(labels)) continue
      sum += Number(line.slice(line.lastIndexOf(' ') + 1))
    }
    return sum
  }

  signal(signal: NodeJS.Signals): void {
    this.process?.child.kill(signal)
  }

  /** The release it runs (a checkout's root). */
  get release(): string {
    return this.settings.release
  }

  /**
   * A rolling deploy's step: SIGTERM (readiness off, drain, exit), then `release` started on the
   * same ports; resolves once the new process is ready.
   */
  async replaceWith(release: string, preparedStatements = this.settings.preparedStatements): Promise<void> {
    this.settings.preparedStatements = preparedStatements
    const running = this.process
    running?.child.kill('SIGTERM')
    const code = await running?.exited
    if (code !== 0 && code !== undefined)
      throw new Error(`${this.name} exited ${code} on SIGTERM:\n${running?.tail()}`)
    this.settings.release = release
    await this.start()
  }
}

export interface ServerState {
  readonly status: string
  /** Requests sent to it so far. */
  readonly sent: number
  readonly current: number
}

/** HAProxy's settings the test runs each store fault under: the reference file's, and an operator's own. */
export interface HAProxySettings {
  /** Told in the summary. */
  readonly label: string
  /** The reference file, changed (or not) as an operator would write theirs. */
  readonly edit: (reference: string) => string
}

/** docs/topology/haproxy.conf as it is. */
export const DOCUMENTED_HAPROXY: HAProxySettings = { label: 'documented haproxy.conf', edit: (text) => text }

/**
 * Ordinary settings that an operator might write: a check every 250 ms and no `timeout check`, so
 * that HAProxy gives each check its `inter`, 250 ms, to answer in.
 */
export const QUICK_CHECKS_HAPROXY: HAProxySettings = {
  label: 'inter 250ms, no timeout check',
  edit(text) {
    const checks = 'check inter 500ms fastinter 250ms downinter 1s '
    const timeout = /^ *timeout check .*\n/m
    if (!text.includes(checks) || !timeout.test(text))
      throw new Error('docs/topology/haproxy.conf no longer has the check settings this variant replaces')
    return text.replace(checks, 'check inter 250ms ').replace(timeout, '')
  },
}

export class HAProxy {
  process: Tracked | undefined

  constructor(
    private readonly run: RunDir,
    readonly port: number,
    readonly statsPort: number,
    private readonly instances: readonly Instance[],
    readonly settings: HAProxySettings = DOCUMENTED_HAPROXY,
    private readonly name = 'haproxy',
  ) {}

  async start(): Promise<void> {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      OPENBOOK_LB_BIND: `127.0.0.1:${this.port}`,
      OPENBOOK_LB_STATS_BIND: `127.0.0.1:${this.statsPort}`,
    }
    this.instances.forEach((instance, index) => {
      env[`OPENBOOK_APP${index + 1}`] = `127.0.0.1:${instance.port}`
      env[`OPENBOOK_APP${index + 1}_OPS_PORT`] = String(instance.opsPort)
    })
    const reference = readFileSync(`${ROOT}docs/topology/haproxy.conf`, 'utf8')
    const edited = this.settings.edit(reference)
    const config =
      edited === reference ? `${ROOT}docs/topology/haproxy.conf` : this.run.file(`${this.name}.conf`)
    if (edited !== reference) writeFileSync(config, edited)
    this.process = this.run.spawn(this.name, '/usr/sbin/haproxy', ['-db', '-f', config], { env })
    await until(
      'HAProxy to see every instance up',
      async () => {
        try {
          const states = await this.servers()
          return this.instances.every((_, index) => states[`app${index + 1}`]?.status === 'UP')
        } catch {
          return false
        }
      },
      15_000,
      this.process,
    )
  }

  /** Per server: status (UP, DOWN, "UP 1/2"...), requests sent, current sessions; from /stats;csv. */
  async servers(): Promise<Record<string, ServerState>> {
    const response = await fetch(`http://127.0.0.1:${this.statsPort}/stats;csv`, {
      signal: AbortSignal.timeout(2_000),
    })
    const [header, ...rows] = (await response.text()).trim().split('\n')
    const columns = (header ?? '').replace(/^# /, '').split(',')
    const at = (row: string[], name: string) => row[columns.indexOf(name)] ?? ''
    const result: Record<string, ServerState> = {}
    for (const line of rows) {
      const row = line.split(',')
      if (at(row, 'pxname') !== 'openbook_instances') continue
      const name = at(row, 'svname')
      if (name === 'BACKEND' || name === 'FRONTEND') continue
      result[name] = {
        status: at(row, 'status'),
        sent: Number(at(row, 'stot')),
        current: Number(at(row, 'scur')),
      }
    }
    return result
  }

  /** Retries HAProxy made, from its log (the 5th of the connection counters actconn/feconn/beconn/srv_conn/retries). */
  retries(): number {
    let total = 0
    if (!this.process) return 0
    for (const line of readFileSync(this.process.log, 'utf8').split('\n')) {
      const match = / \d+\/\d+\/\d+\/\d+\/\+?(\d+) \d+\/\d+ "/.exec(line)
      if (match) total += Number(match[1])
    }
    return total
  }
}

export { until }
