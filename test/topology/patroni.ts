import { chownSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { ROOT } from '../helpers/process.js'
import { postgresBin, query, urlOf } from './postgres.js'
import type { RunDir, Tracked } from './run-dir.js'
import { accepts, render, until } from './services.js'

/**
 * Patroni's DCS timings in the loopback test, in seconds: docs/topology/patroni.yml carries the
 * production ones (30/10/10). Patroni requires loop_wait + 2 x retry_timeout <= ttl.
 */
export const DCS = { ttl: 10, loopWait: 2, retryTimeout: 4 } as const

/** docs/topology/patroni.yml with the loopback test's DCS timings; refuses a file without the documented ones. */
export function loopbackTimings(reference: string): string {
  const production = ['    ttl: 30\n', '    loop_wait: 10\n', '    retry_timeout: 10\n']
  if (!production.every((line) => reference.includes(line)))
    throw new Error('docs/topology/patroni.yml no longer has the DCS timings the test replaces')
  return reference
    .replace(production[0] as string, `    ttl: ${DCS.ttl}\n`)
    .replace(production[1] as string, `    loop_wait: ${DCS.loopWait}\n`)
    .replace(production[2] as string, `    retry_timeout: ${DCS.retryTimeout}\n`)
}

/** HAProxy's checks on Patroni's REST port (docs/topology/haproxy-patroni.conf's first default-server), in ms. */
export function haproxyChecks(): {
  inter: number
  fastinter: number
  fall: number
  rise: number
  timeout: number
} {
  const text = readFileSync(`${ROOT}docs/topology/haproxy-patroni.conf`, 'utf8')
  const line = text.split('\n').find((entry) => entry.trim().startsWith('default-server '))
  const timeout = /^ *timeout check (\d+)(ms|s)$/m.exec(text)
  const value = (name: string, match: RegExpExecArray | null) => {
    if (!match) throw new Error(`no ${name} in docs/topology/haproxy-patroni.conf`)
    return Number(match[1]) * (match[2] === 's' ? 1000 : 1)
  }
  const get = (name: string) => value(name, new RegExp(` ${name} (\\d+)(ms|s)?\\b`).exec(line ?? ''))
  return {
    inter: get('inter'),
    fastinter: get('fastinter'),
    fall: get('fall'),
    rise: get('rise'),
    timeout: value('timeout check', timeout),
  }
}

/** A single-node etcd 3.4 on loopback, its data in the run (so that a restart finds the cluster again). */
export class Etcd {
  process: Tracked | undefined
  private starts = 0

  constructor(
    private readonly run: RunDir,
    readonly clientPort: number,
    readonly peerPort: number,
  ) {}

  async start(): Promise<void> {
    this.starts++
    const client = `http://127.0.0.1:${this.clientPort}`
    const peer = `http://127.0.0.1:${this.peerPort}`
    this.process = this.run.spawn(`etcd-${this.starts}`, '/usr/bin/etcd', [
      ...['--name', 'etcd1', '--data-dir', this.run.file('etcd')],
      ...['--listen-client-urls', client, '--advertise-client-urls', client],
      ...['--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer],
      ...['--initial-cluster', `etcd1=${peer}`],
    ])
    await until(
      'etcd to be healthy',
      async () => {
        try {
          const response = await fetch(`${client}/health`, { signal: AbortSignal.timeout(2_000) })
          return response.ok
        } catch {
          return false
        }
      },
      30_000,
      this.process,
    )
  }

  kill(): void {
    this.process?.child.kill('SIGKILL')
  }
}

/** The REST status of `path` on a Patroni node, or 0 when nothing answers. */
export async function rest(port: number, path: string): Promise<number> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(2_000) })
    await response.arrayBuffer()
    return response.status
  } catch {
    return 0
  }
}

/** One PostgreSQL node with its Patroni, configured from docs/topology/patroni.yml. */
export class PatroniNode {
  process: Tracked | undefined
  private starts = 0
  readonly config: string
  readonly dataDir: string

  constructor(
    private readonly run: RunDir,
    readonly name: string,
    readonly pgPort: number,
    readonly restPort: number,
    etcdPort: number,
  ) {
    const dir = run.serviceDir(name)
    this.dataDir = `${dir}/data`
    this.config = run.file(`${name}.yml`)
    writeFileSync(
      this.config,
      render(loopbackTimings(readFileSync(`${ROOT}docs/topology/patroni.yml`, 'utf8')), {
        NODE_NAME: name,
        NODE_HOST: '127.0.0.1',
        REST_PORT: restPort,
        PG_PORT: pgPort,
        ETCD_HOSTS: `127.0.0.1:${etcdPort}`,
        DATA_DIR: this.dataDir,
        BIN_DIR: postgresBin(),
        RUN_DIR: dir,
        SOCKET_DIR: dir,
        LOCAL_AUTH: 'trust',
        HOST_AUTH: 'trust',
        CLIENT_NETWORK: '127.0.0.1/32',
        SUPERUSER_PASSWORD: 'topology-superuser',
        REPLICATION_PASSWORD: 'topology-replication',
        REWIND_PASSWORD: 'topology-rewind',
      }),
    )
    if (run.identity) chownSync(this.config, run.identity.uid, run.identity.gid)
  }

  /** The superuser's URL straight to this node. */
  url(database = 'postgres'): string {
    return urlOf(this.pgPort, 'postgres', database)
  }

  /** Starts Patroni (our child), which starts PostgreSQL; resolves once its REST API answers. */
  async start(): Promise<void> {
    this.starts++
    this.process = this.run.spawn(`${this.name}-patroni-${this.starts}`, '/usr/bin/patroni', [this.config], {
      asService: true,
      env: { ...process.env, HOME: this.run.path },
    })
    await until(`${this.name}'s Patroni to answer`, () => accepts(this.restPort), 30_000, this.process)
  }

  /** The postmaster's pid, from postmaster.pid (undefined while PostgreSQL is down). */
  postmasterPid(): number | undefined {
    const file = `${this.dataDir}/postmaster.pid`
    if (!existsSync(file)) return undefined
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0])
    return pid > 0 ? pid : undefined
  }

  /** SIGKILL to the postmaster only: Patroni sees PostgreSQL gone on its next loop. */
  killPostgres(): number | undefined {
    const pid = this.postmasterPid()
    if (pid) process.kill(pid, 'SIGKILL')
    return pid
  }

  /** SIGKILL to Patroni and to the postmaster together: a lost host. Resolves once both are gone. */
  async killHost(): Promise<void> {
    const pid = this.postmasterPid()
    this.process?.child.kill('SIGKILL')
    if (pid) process.kill(pid, 'SIGKILL')
    await this.process?.exited
    // The backends see their postmaster gone and exit; the port is free once they have.
    await until(`${this.name}'s PostgreSQL to be gone`, async () => !(await accepts(this.pgPort)), 30_000)
  }

  /** Patroni's log so far (its own lines and PostgreSQL's). */
  log(): string {
    return this.process ? readFileSync(this.process.log, 'utf8') : ''
  }

  async role(): Promise<'primary' | 'replica' | 'none'> {
    if ((await rest(this.restPort, '/primary')) === 200) return 'primary'
    if ((await rest(this.restPort, '/replica')) === 200) return 'replica'
    return 'none'
  }

  async inRecovery(): Promise<boolean> {
    const [row] = await query<{ standby: boolean }>(this.url(), 'SELECT pg_is_in_recovery() AS standby')
    return row?.standby === true
  }
}

/** HAProxy with docs/topology/haproxy-patroni.conf: the primary port, the replicas' port. */
export class PatroniHAProxy {
  process: Tracked | undefined

  constructor(
    private readonly run: RunDir,
    readonly primaryPort: number,
    readonly replicaPort: number,
    readonly statsPort: number,
    private readonly nodes: readonly PatroniNode[],
  ) {}

  async start(): Promise<void> {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PG_PRIMARY_BIND: `127.0.0.1:${this.primaryPort}`,
      PG_REPLICA_BIND: `127.0.0.1:${this.replicaPort}`,
      PG_STATS_BIND: `127.0.0.1:${this.statsPort}`,
    }
    this.nodes.forEach((node, index) => {
      env[`PG_NODE${index + 1}`] = `127.0.0.1:${node.pgPort}`
      env[`PG_NODE${index + 1}_REST_PORT`] = String(node.restPort)
    })
    this.process = this.run.spawn(
      'haproxy-patroni',
      '/usr/sbin/haproxy',
      ['-db', '-f', `${ROOT}docs/topology/haproxy-patroni.conf`],
      { env },
    )
    await until(
      'HAProxy to listen on the primary port',
      () => accepts(this.primaryPort),
      15_000,
      this.process,
    )
  }

  /** Per backend (postgres_primary, postgres_replicas), the nodes HAProxy has UP. */
  async up(): Promise<Record<string, string[]>> {
    const response = await fetch(`http://127.0.0.1:${this.statsPort}/stats;csv`, {
      signal: AbortSignal.timeout(2_000),
    })
    const [header, ...rows] = (await response.text()).trim().split('\n')
    const columns = (header ?? '').replace(/^# /, '').split(',')
    const result: Record<string, string[]> = { postgres_primary: [], postgres_replicas: [] }
    for (const line of rows) {
      const row = line.split(',')
      const at = (name: string) => row[columns.indexOf(name)] ?? ''
      const backend = result[at('pxname')]
      if (backend && at('status') === 'UP' && at('svname').startsWith('node')) backend.push(at('svname'))
    }
    return result
  }
}
