import { appendFileSync, existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { RunDir, Tracked } from './run-dir.js'

/** PostgreSQL 15's server binaries (Debian's postgresql-15), else the newest installed. */
export function postgresBin(): string {
  const root = '/usr/lib/postgresql'
  if (existsSync(`${root}/15/bin/postgres`)) return `${root}/15/bin`
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(`${root}/${v}/bin/postgres`))
        .sort((a, b) => Number(b) - Number(a))
    : []
  if (!versions[0]) throw new Error(`no PostgreSQL server binaries under ${root} (Debian package postgresql)`)
  return `${root}/${versions[0]}/bin`
}

export function urlOf(port: number, user: string, database: string, password?: string): string {
  const auth = password ? `${user}:${encodeURIComponent(password)}` : user
  return `postgres://${auth}@127.0.0.1:${port}/${database}`
}

export async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 })
  client.on('error', () => {})
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end().catch(() => {})
  }
}

export async function query<Row extends object>(
  url: string,
  text: string,
  params: unknown[] = [],
): Promise<Row[]> {
  return withClient(url, async (client) => (await client.query<Row>(text, params)).rows)
}

/** One PostgreSQL server of the topology: a data directory, a port, and the process serving it. */
export class PgNode {
  process: Tracked | undefined
  private starts = 0

  constructor(
    private readonly run: RunDir,
    readonly name: string,
    readonly dir: string,
    readonly port: number,
  ) {}

  /** The superuser's URL (initdb -U postgres, trust on loopback). */
  url(database = 'postgres', user = 'postgres'): string {
    return urlOf(this.port, user, database)
  }

  /** Starts the postmaster in the foreground (our child), resolves once it accepts connections. */
  async start(): Promise<void> {
    this.starts++
    const bin = postgresBin()
    this.process = this.run.spawn(`${this.name}-${this.starts}`, `${bin}/postgres`, ['-D', this.dir], {
      asService: true,
    })
    const deadline = Date.now() + 30_000
    for (;;) {
      const exited = await Promise.race([this.process.exited, sleep(100).then(() => 'running' as const)])
      if (exited !== 'running')
        throw new Error(`${this.name} exited (${exited}) while starting:\n${this.process.tail()}`)
      try {
        await query(this.url(), 'SELECT 1')
        return
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`${this.name} did not accept connections: ${(error as Error).message}`)
      }
    }
  }

  /** Fast shutdown (SIGINT): sessions are ended, and the server stops cleanly. */
  async stop(): Promise<void> {
    const running = this.process
    if (!running) return
    running.child.kill('SIGINT')
    await running.exited
    this.process = undefined
  }
}

const SETTINGS = (port: number, socketDir: string) => `
# test/topology: a loopback cluster of its own
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = '${socketDir}'
max_connections = 100
shared_buffers = 64MB
wal_level = replica
max_wal_senders = 5
max_replication_slots = 5
hot_standby = on
# Nothing here outlives the run: flushing to disk only slows it down.
fsync = off
full_page_writes = off
log_min_messages = warning
log_checkpoints = off
# How often the request path's statements are planned, against how often they run (the steady
# load's check that nothing is planned again per request behind PgBouncer).
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track_planning = on
`

/** initdb as the service user, its own settings and pg_hba.conf (trust on loopback, replication too). */
export async function createPrimary(run: RunDir, port: number): Promise<PgNode> {
  const bin = postgresBin()
  const dir = run.serviceDir('primary')
  const socketDir = run.serviceDir('sockets', 0o755)
  await run.run(
    'initdb',
    `${bin}/initdb`,
    ['-D', dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-instructions'],
    { asService: true },
  )
  appendFileSync(join(dir, 'postgresql.conf'), SETTINGS(port, socketDir))
  writeFileSync(
    join(dir, 'pg_hba.conf'),
    [
      'local all all trust',
      'host all all 127.0.0.1/32 trust',
      'local replication all trust',
      'host replication all 127.0.0.1/32 trust',
      '',
    ].join('\n'),
  )
  const node = new PgNode(run, 'primary', dir, port)
  await node.start()
  return node
}

/**
 * A streaming replica: pg_basebackup -R from the primary (with a replication slot, so that the
 * primary keeps the WAL a stopped replica still needs), on a port of its own.
 */
export async function createReplica(
  run: RunDir,
  primary: PgNode,
  port: number,
  name = 'replica',
): Promise<PgNode> {
  const bin = postgresBin()
  const dir = run.serviceDir(name)
  await run.run(
    'pg_basebackup',
    `${bin}/pg_basebackup`,
    [
      ...['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres'],
      ...['-D', dir, '-R', '-X', 'stream', '-c', 'fast', '-C', '-S', `topology_${name}`],
    ],
    { asService: true },
  )
  // The copy carries the primary's settings; the last `port` line wins. The standby reports its
  // replay position every second instead of every 10 s: `keys revoke` waits for that report
  // (pg_stat_replication.replay_lsn), so it returns within a second of the replay.
  appendFileSync(join(dir, 'postgresql.conf'), `port = ${port}\nwal_receiver_status_interval = 1s\n`)
  const node = new PgNode(run, name, dir, port)
  await node.start()
  return node
}

/** Waits until the replica has replayed everything the primary has written so far. */
export async function waitForReplay(primary: PgNode, replica: PgNode, ms = 30_000): Promise<void> {
  const [{ lsn }] = (await query<{ lsn: string }>(
    primary.url(),
    'SELECT pg_current_wal_lsn()::text AS lsn',
  )) as [{ lsn: string }]
  const deadline = Date.now() + ms
  for (;;) {
    const [row] = await query<{ done: boolean }>(
      replica.url(),
      'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done',
      [lsn],
    )
    if (row?.done) return
    if (Date.now() > deadline) throw new Error(`the replica did not replay ${lsn} within ${ms} ms`)
    await sleep(50)
  }
}
