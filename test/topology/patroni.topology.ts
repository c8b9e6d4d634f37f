import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { type CliResult, json, openbook } from '../cli/run.js'
import { ROOT } from '../helpers/process.js'
import { type Expected, type LoadReport, runLoad } from './load.js'
import { expectedPages, freePorts } from './pages.js'
import { DCS, Etcd, haproxyChecks, PatroniHAProxy, PatroniNode, rest } from './patroni.js'
import { postgresBin, query, urlOf } from './postgres.js'
import { ms, n, Summary, say } from './report.js'
import { RunDir, reapStaleRuns } from './run-dir.js'
import { API_PASSWORD, HAProxy, type HAProxySettings, Instance, PgBouncer, until } from './services.js'

/**
 * openbook under Patroni on loopback, with the real engines: a single-node etcd, two PostgreSQL 15
 * nodes each run by its Patroni (docs/topology/patroni.yml), HAProxy routing a primary port by
 * Patroni's /primary and a replicas' port by /replica (docs/topology/haproxy-patroni.conf),
 * PgBouncer in front of both ports (docs/topology/pgbouncer.conf), two `node dist/server.js`
 * instances behind their own HAProxy (docs/topology/haproxy.conf). Each fault runs under a bounded
 * read load; nobody repoints anything.
 *
 * What a fault may cost follows from the settings, never from a wall-clock guess: the time Patroni
 * takes to act (ttl, loop_wait), HAProxy's checks (inter, fastinter, fall, rise, timeout check),
 * PgBouncer's server_login_retry, and a margin that grows with the machine's load (patience).
 */

const RATE = 100
const CONNECTIONS = 8
const SHUTDOWN_DELAY_MS = 2_000
const SEED = 11
/** How long the load runs before each fault. */
const LEAD_MS = 2_000

const checks = haproxyChecks()
/** HAProxy takes a node out within this once its REST check fails: the next check, then `fall` quick ones that may each time out. */
const HAPROXY_OUT_MS = checks.inter + checks.fall * (checks.fastinter + checks.timeout)
/** ...and puts it back within this once the check passes (`rise` checks; downinter = inter here). */
const HAPROXY_IN_MS = checks.inter + checks.rise * (checks.inter + checks.timeout)
/** PgBouncer tries a server again this long after a failed login (docs/topology/pgbouncer.conf). */
const LOGIN_RETRY_MS = (() => {
  const setting = /^server_login_retry = (\d+)$/m.exec(
    readFileSync(`${ROOT}docs/topology/pgbouncer.conf`, 'utf8'),
  )
  if (!setting) throw new Error('docs/topology/pgbouncer.conf no longer sets server_login_retry')
  return Number(setting[1]) * 1000
})()
/** What the machine's load adds to starting PostgreSQL, a promotion, a pg_rewind (10 s idle, more when loaded). */
const MARGIN_MS = patience(10_000)
const TTL_MS = DCS.ttl * 1000
const LOOP_MS = DCS.loopWait * 1000
/**
 * READY_OUTAGE_GRACE_MS as docs/operators/high-availability.md sets it: above the longest outage
 * of the primary that Patroni heals itself (a lost host: ttl + loop_wait, then HAProxy's join
 * and PgBouncer's next login), so that an instance reading on the replica stays in the balancer
 * and serves meanwhile.
 */
const READY_GRACE_MS = TTL_MS + LOOP_MS + HAPROXY_IN_MS + LOGIN_RETRY_MS

const summary = new Summary()
let run: RunDir | undefined
let etcd: Etcd
let nodes: PatroniNode[] = []
let pgLb: PatroniHAProxy
let bouncer: PgBouncer
let lb: HAProxy
let instances: Instance[] = []
let expected: Expected[] = []
const keys: { org: string; key: string }[] = []
/** The owner through HAProxy's primary port: always the current primary, as an operator's CLI would be. */
let ownerUrl = ''
let superUrl = ''
/** Every ETag seen on a page, with a digest of the body it came with: one tag, one body. */
const etags = new Map<string, string>()
const etagRepeats: string[] = []
/**
 * Answers through the primary port from a node while another node held the leader key: a demoted
 * node, or one whose Patroni is gone, read as the primary after a new one was chosen (must never
 * happen).
 */
let staleAnswers = 0
/**
 * Answers through the primary port from a server in recovery while no other node held the key:
 * the leader's PostgreSQL in crash recovery, or a leader demoted while no node could be chosen
 * (etcd lost). It has every commit there is: nothing newer exists anywhere.
 */
let recoveringAnswers = 0
let primaryProbes = 0

async function cli(args: readonly string[]): Promise<CliResult> {
  const result = await openbook(args, { DATABASE_URL: ownerUrl })
  if (result.code !== 0) throw new Error(`openbook ${args.join(' ')}: exit ${result.code}: ${result.stderr}`)
  return result
}

/** Only the first two instances of the reference haproxy.conf: this topology runs two. */
const TWO_INSTANCES: HAProxySettings = {
  label: 'documented haproxy.conf, two instances',
  edit(text) {
    const app3 = /^ *server app3 .*\n/m
    if (!app3.test(text))
      throw new Error('docs/topology/haproxy.conf no longer has the app3 line this test removes')
    return text.replace(app3, '')
  },
}

async function leader(): Promise<PatroniNode | undefined> {
  for (const node of nodes) if ((await node.role()) === 'primary') return node
  return undefined
}

async function roleOf(node: PatroniNode, role: 'primary' | 'replica', within: number): Promise<void> {
  await until(`${node.name} to be ${role}`, async () => (await node.role()) === role, within)
}

/** HAProxy's primary port leads to `primary` (none: nowhere), and its replicas' port to `replicas` (when given). */
async function routed(
  primary: PatroniNode | undefined,
  replicas: readonly PatroniNode[] | undefined,
  within: number,
): Promise<void> {
  await until(
    `HAProxy to route the primary port to ${primary?.name ?? 'nothing'}${replicas ? ` and replicas to ${replicas.map((r) => r.name).join(',') || 'nothing'}` : ''}`,
    async () => {
      const up = await pgLb.up().catch(() => undefined)
      return (
        up?.postgres_primary?.join() === (primary ? primary.name : '') &&
        (!replicas || up?.postgres_replicas?.join() === replicas.map((r) => r.name).join())
      )
    },
    within,
  )
}

async function status(instance: Instance, key: string, path = 'customers?limit=1'): Promise<number> {
  try {
    const response = await fetch(`http://127.0.0.1:${instance.port}/api/public/v1/${path}`, {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(10_000),
    })
    await response.arrayBuffer()
    return response.status
  } catch {
    return 0
  }
}

/** The first page of the first key's customers from `instance`: its ETag, its body's digest. */
async function page(instance: Instance): Promise<{ etag: string; body: string } | undefined> {
  const response = await fetch(`http://127.0.0.1:${instance.port}/api/public/v1/customers?limit=20`, {
    headers: { authorization: `Bearer ${keys[0]?.key}`, 'accept-encoding': 'identity' },
    signal: AbortSignal.timeout(10_000),
  }).catch(() => undefined)
  if (response?.status !== 200) {
    await response?.arrayBuffer()
    return undefined
  }
  const body = createHash('sha256')
    .update(await response.text())
    .digest('hex')
  const etag = response.headers.get('etag') ?? ''
  const seen = etags.get(etag)
  if (seen !== undefined && seen !== body) etagRepeats.push(`${etag} on ${instance.name}`)
  etags.set(etag, body)
  return { etag, body }
}

/**
 * One connection through the primary port, kept open and opened again when lost, asking every
 * 250 ms whether the server is in recovery, and which node it is; a standby answering is then
 * weighed against who holds the leader key (Patroni's GET /leader). Runs until `stop` resolves.
 */
async function probePrimaryPort(stop: Promise<void>): Promise<void> {
  let done = false
  void stop.then(() => {
    done = true
  })
  let client: pg.Client | undefined
  while (!done) {
    try {
      if (!client) {
        client = new pg.Client({ connectionString: superUrl, connectionTimeoutMillis: 1_000 })
        client.on('error', () => {})
        await client.connect()
      }
      const { rows } = await client.query<{ standby: boolean; port: string }>(
        "SELECT pg_is_in_recovery() AS standby, current_setting('port') AS port",
      )
      primaryProbes++
      const row = rows[0]
      // Any answer from a node while another holds the key is stale, a standby's or a primary's
      // whose Patroni is gone (its PostgreSQL runs on as a primary until Patroni comes back).
      const holders = await Promise.all(
        nodes.map(async (node) => ((await rest(node.restPort, '/leader')) === 200 ? node : undefined)),
      )
      if (holders.some((node) => node && String(node.pgPort) !== row?.port)) staleAnswers++
      else if (row?.standby) recoveringAnswers++
    } catch {
      await client?.end().catch(() => {})
      client = undefined
    }
    await sleep(250)
  }
  await client?.end().catch(() => {})
}

interface FaultResult {
  readonly load: LoadReport
  /** When the fault was made, ms into the load. */
  readonly at: number
  /** ms after the fault until both instances answered a key lookup 200 again, and the topology was as `settled` waits. */
  readonly readyMs: number
  /** ms after the fault until the first 200 of the load. */
  readonly firstOkMs: number
  readonly inFlight: number
  /** Failures of requests sent after `at + boundMs`: what the settings do not explain. */
  readonly late: number
  readonly serverErrors: number
  /** Probes of the primary port answered by a node while another held the key (staleAnswers). */
  readonly standbyAnswers: number
  /** ...and by a node in recovery while no other node held the key (recoveringAnswers). */
  readonly recovering: number
  /** Probes of the primary port answered during the load. */
  readonly probes: number
}

/**
 * A load through the instances' balancer with `fault` made LEAD_MS in; then `settled` (the
 * topology back as expected) and both instances serving. Requests sent later than `boundMs` after
 * the fault must not fail.
 */
async function underLoad(
  name: string,
  boundMs: number,
  fault: () => Promise<void>,
  settled: () => Promise<void>,
): Promise<FaultResult> {
  let at = 0
  let readyMs = Number.NaN
  const standbyBefore = staleAnswers
  const recoveringBefore = recoveringAnswers
  const probesBefore = primaryProbes
  let stopProbe: () => void = () => {}
  const probe = probePrimaryPort(
    new Promise<void>((resolve) => {
      stopProbe = resolve
    }),
  )
  const load = await runLoad({
    name,
    url: `http://127.0.0.1:${lb.port}`,
    expected,
    // Through the fault's bound without the load's margin, and 8 s of serving after it: the
    // figures come from this window (the waits below still allow the whole margin).
    seconds: Math.ceil((LEAD_MS + boundMs - MARGIN_MS) / 1000) + 8,
    rate: RATE,
    connections: CONNECTIONS,
    async during(elapsed) {
      await sleep(LEAD_MS)
      at = elapsed()
      await fault()
      await settled()
      await until(
        'both instances to serve key lookups',
        async () =>
          (await Promise.all(instances.map((i) => status(i, keys[1]?.key ?? '')))).every((s) => s === 200),
        boundMs + MARGIN_MS,
      )
      readyMs = elapsed() - at
    },
  })
  stopProbe()
  await probe
  const firstOk = Math.min(...load.okEnds.filter((end) => end > at))
  const result: FaultResult = {
    load,
    at,
    readyMs,
    firstOkMs: firstOk - at,
    inFlight: load.inFlightAt(at, 2),
    late: load.failures.filter((f) => f.start > at + boundMs).length,
    serverErrors: load.failures.filter((f) => f.what.startsWith('500')).length,
    standbyAnswers: staleAnswers - standbyBefore,
    recovering: recoveringAnswers - recoveringBefore,
    probes: primaryProbes - probesBefore,
  }
  return result
}

function figures(result: FaultResult, boundMs: number, why: string): string {
  const { load } = result
  const kinds = new Map<string, number>()
  for (const failure of load.failures) {
    const kind = failure.what.slice(0, 40)
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1)
  }
  const within = load.failures.length - result.late
  // When the failures were sent (from the fault) and how long each waited: a 503 after
  // REQUEST_DEADLINE_MS is a request that found no primary in time.
  const sent = load.failures.map((f) => f.start - result.at)
  const waited = load.failures.map((f) => f.end - f.start)
  const range = (values: number[]) => `${ms(Math.min(...values))}..${ms(Math.max(...values))}`
  const when = load.failures.length
    ? `, sent ${range(sent)} after the fault, each answered after ${range(waited)}`
    : ''
  return (
    `${n(load.requests)} requests in ${load.seconds} s, ${n(load.ok)} correct, ${load.wrong} wrong; ` +
    `${load.failures.length} failed (${result.inFlight} in flight at the fault, ${within} sent within the bound of ${ms(boundMs - MARGIN_MS)} + margin ${ms(MARGIN_MS)} = ${why}, ${result.late} after it)` +
    `${kinds.size ? ` [${[...kinds].map(([k, v]) => `${v}x ${k}`).join('; ')}${when}]` : ''}; ` +
    `first 200 ${ms(result.firstOkMs)} after the fault; topology settled and both instances serving ${ms(result.readyMs)} after; ` +
    `primary-port probes ${result.probes}: from a node while another held the key ${result.standbyAnswers}, ` +
    `from a node in recovery while no other held it ${result.recovering}`
  )
}

function holds(result: FaultResult, boundMs: number): void {
  expect(result.late, `failures sent more than ${boundMs} ms after the fault`).toBe(0)
  expect(result.load.wrong).toBe(0)
  expect(result.serverErrors).toBe(0)
  expect(result.standbyAnswers).toBe(0)
  expect(result.readyMs).toBeLessThanOrEqual(boundMs + MARGIN_MS)
}

/**
 * After a fault: a key made on the (new) primary serves on both instances, and once revoked there
 * answers 401 on both; the page of a list changed on it gets a new ETag on both, and no ETag ever
 * came with two bodies.
 */
async function afterFault(label: string): Promise<string> {
  const created = json<{ id: string; key: string }>(
    await cli([
      'keys',
      'create',
      '--org',
      'org_patroni',
      '--as',
      'ops@patroni.example',
      '--env',
      'test',
      '--json',
    ]),
  )
  // A new key is found on the replica once it has replayed the key's creation (keys create does
  // not wait for the standbys, keys revoke does).
  const before: number[] = []
  await until(
    'the new key to serve on both instances',
    async () => {
      before.splice(0, before.length, ...(await Promise.all(instances.map((i) => status(i, created.key)))))
      return before.every((code) => code === 200)
    },
    MARGIN_MS,
  ).catch(() => {})
  await cli(['keys', 'revoke', created.id, '--wait-timeout', '20'])
  const after = await Promise.all(instances.map((i) => status(i, created.key)))
  const pagesBefore = await Promise.all(instances.map(page))
  const first = expected[0]?.ids[0] ?? ''
  await query(
    superUrl.replace(/\/postgres$/, '/openbook'),
    'UPDATE customers SET notes = $1 WHERE org_id = $2 AND id = $3',
    [`${label} ${Date.now()}`, keys[0]?.org, first],
  )
  const pagesAfter: ({ etag: string } | undefined)[] = []
  await until(
    'both instances to serve the changed page with a new ETag',
    async () => {
      const now = await Promise.all(instances.map(page))
      pagesAfter.splice(0, pagesAfter.length, ...now)
      return now.every((p, i) => p !== undefined && p.etag !== pagesBefore[i]?.etag)
    },
    MARGIN_MS,
  ).catch(() => {})
  const changed = pagesAfter.every((p, i) => p !== undefined && p.etag !== pagesBefore[i]?.etag)
  expect(before).toEqual([200, 200])
  expect(after).toEqual([401, 401])
  expect(changed).toBe(true)
  expect(etagRepeats).toEqual([])
  return `a key made on the primary ${before.join('/')}, revoked ${after.join('/')}; changed page: new ETag on both ${changed}; ETags with two bodies ${etagRepeats.length}`
}

function report(check: string, text: string, ok: boolean): void {
  summary.add(check, text, ok ? 'pass' : 'FAIL')
}

describe('openbook under Patroni on loopback', () => {
  beforeAll(async () => {
    const started = performance.now()
    const missing = ['/usr/sbin/pgbouncer', '/usr/sbin/haproxy', '/usr/bin/patroni', '/usr/bin/etcd'].filter(
      (path) => !existsSync(path),
    )
    if (missing.length > 0)
      throw new Error(
        `missing ${missing.join(', ')}: install Debian's packages (apt-get install -y pgbouncer haproxy patroni etcd-server; bash .ci/run does)`,
      )
    postgresBin()
    for (const dir of reapStaleRuns()) say(`patroni: removed what an earlier run left: ${dir}`)
    run = new RunDir()
    say(`patroni: building in ${run.path}`)
    const [
      etcdClient,
      etcdPeer,
      pg1,
      pg2,
      rest1,
      rest2,
      primaryPort,
      replicaPort,
      pgStats,
      bouncerPort,
      lbPort,
      lbStats,
      ...appPorts
    ] = (await freePorts(17)) as number[]
    etcd = new Etcd(run, etcdClient as number, etcdPeer as number)
    await etcd.start()
    nodes = [
      new PatroniNode(run, 'node1', pg1 as number, rest1 as number, etcdClient as number),
      new PatroniNode(run, 'node2', pg2 as number, rest2 as number, etcdClient as number),
    ]
    const [node1, node2] = nodes as [PatroniNode, PatroniNode]
    // node1 bootstraps the cluster (initdb, bootstrap.dcs into etcd); node2 then clones it.
    await node1.start()
    await roleOf(node1, 'primary', patience(60_000))
    await node2.start()
    await roleOf(node2, 'replica', patience(90_000))
    pgLb = new PatroniHAProxy(run, primaryPort as number, replicaPort as number, pgStats as number, nodes)
    await pgLb.start()
    await routed(node1, [node2], patience(20_000))
    superUrl = urlOf(primaryPort as number, 'postgres', 'postgres')

    // The README's production roles, made through the primary port.
    await query(superUrl, 'CREATE ROLE openbook_owner LOGIN CREATEROLE')
    await query(superUrl, 'GRANT pg_read_all_stats TO openbook_owner')
    await query(superUrl, 'CREATE DATABASE openbook OWNER openbook_owner')
    ownerUrl = urlOf(primaryPort as number, 'openbook_owner', 'openbook')
    await cli(['migrate'])
    await query(ownerUrl, `CREATE ROLE openbook_api LOGIN PASSWORD '${API_PASSWORD}' IN ROLE openbook_reader`)
    await cli([
      'seed',
      '--orgs',
      '3',
      '--customers',
      '3000',
      '--appointments',
      '6000',
      '--seed',
      String(SEED),
    ])
    const openbookSuper = urlOf(primaryPort as number, 'postgres', 'openbook')
    await query(openbookSuper, "UPDATE organizations SET plan = 'enterprise'")
    await cli([
      ...['orgs', 'create', '--name', 'Patroni', '--plan', 'enterprise', '--id', 'org_patroni'],
      ...['--owner-email', 'ops@patroni.example'],
    ])
    const owners = await query<{ org: string; email: string }>(
      openbookSuper,
      `SELECT m.org_id AS org, u.email FROM memberships m JOIN users u ON u.id = m.user_id
       WHERE m.role = 'owner' AND m.org_id LIKE 'org\\_${SEED}\\_%' ORDER BY m.org_id LIMIT 2`,
    )
    for (const owner of owners) {
      const created = json<{ key: string }>(
        await cli(['keys', 'create', '--org', owner.org, '--as', owner.email, '--env', 'test', '--json']),
      )
      keys.push({ org: owner.org, key: created.key })
    }
    expected = await expectedPages(openbookSuper, keys)

    bouncer = new PgBouncer(run, bouncerPort as number, primaryPort as number, replicaPort as number)
    await bouncer.start()
    instances = [0, 1].map(
      (index) =>
        new Instance(
          run as RunDir,
          `app${index + 1}`,
          appPorts[2 * index] ?? 0,
          appPorts[2 * index + 1] ?? 0,
          {
            release: ROOT,
            databaseUrl: bouncer.url('openbook'),
            // app1 reads on the replicas' port (key lookup and page), app2 on the primary only:
            // the load meets both paths through every fault.
            readUrl: index === 0 ? bouncer.url('openbook_replica') : undefined,
            shutdownDelayMs: SHUTDOWN_DELAY_MS,
            preparedStatements: 'pooler',
          },
        ),
    )
    // The instances take their environment from this process's (services.ts).
    const grace = process.env.READY_OUTAGE_GRACE_MS
    process.env.READY_OUTAGE_GRACE_MS = String(READY_GRACE_MS)
    try {
      await Promise.all(instances.map((instance) => instance.start()))
    } finally {
      if (grace === undefined) delete process.env.READY_OUTAGE_GRACE_MS
      else process.env.READY_OUTAGE_GRACE_MS = grace
    }
    lb = new HAProxy(run, lbPort as number, lbStats as number, instances, TWO_INSTANCES, 'haproxy-instances')
    await lb.start()
    summary.add(
      'topology up',
      `etcd :${etcdClient}; node1 :${pg1} (REST :${rest1}), node2 :${pg2} (REST :${rest2}); HAProxy primary :${primaryPort}, replicas :${replicaPort}; ` +
        `PgBouncer :${bouncerPort}; 2 instances (READY_OUTAGE_GRACE_MS ${READY_GRACE_MS}); ${expected.length} distinct requests; Patroni ttl/loop_wait/retry_timeout ${DCS.ttl}/${DCS.loopWait}/${DCS.retryTimeout} s; ` +
        `HAProxy checks inter ${checks.inter} fastinter ${checks.fastinter} fall ${checks.fall} rise ${checks.rise} timeout ${checks.timeout} ms; margin ${ms(MARGIN_MS)}; built in ${ms(performance.now() - started)}`,
      'pass',
    )
  }, patience(300_000))

  afterAll(async () => {
    summary.print('Patroni topology test: summary')
    const dir = run?.path
    const keep = process.env.TOPOLOGY_KEEP_LOGS
    await run?.close(5_000, keep)
    if (dir) say(`patroni: stopped every process and removed ${dir}${keep ? ` (logs kept in ${keep})` : ''}`)
  }, patience(60_000))

  it(
    "SIGKILL of the primary's PostgreSQL: Patroni starts it again, and openbook serves on without a person",
    async () => {
      const primary = (await leader()) as PatroniNode
      // Patroni sees PostgreSQL gone on its next loop and starts it again as the leader (it still
      // holds the key); HAProxy puts it back after `rise` checks; PgBouncer logs in again after
      // server_login_retry. Crash recovery and the start take the margin.
      const bound = LOOP_MS + HAPROXY_OUT_MS + HAPROXY_IN_MS + LOGIN_RETRY_MS + MARGIN_MS
      const result = await underLoad(
        'primary PostgreSQL killed',
        bound,
        async () => {
          primary.killPostgres()
        },
        async () => {
          await until(
            'the cluster to have a primary again',
            async () => (await leader()) !== undefined,
            bound,
          )
          const now = (await leader()) as PatroniNode
          await routed(now, undefined, bound)
        },
      )
      const now = (await leader()) as PatroniNode
      const why = `loop_wait ${ms(LOOP_MS)} + HAProxy out ${ms(HAPROXY_OUT_MS)} + in ${ms(HAPROXY_IN_MS)} + server_login_retry ${ms(LOGIN_RETRY_MS)} + margin`
      const after = await afterFault('postgres-killed')
      report(
        `SIGKILL of the primary's PostgreSQL (${primary.name}; primary after: ${now.name})`,
        `${figures(result, bound, why)}; ${after}`,
        result.late === 0 && result.load.wrong === 0 && result.standbyAnswers === 0,
      )
      holds(result, bound)
    },
    patience(240_000),
  )

  it(
    'patronictl switchover: the replica becomes the primary, the old primary follows it',
    async () => {
      const primary = (await leader()) as PatroniNode
      const replica = nodes.find((node) => node !== primary) as PatroniNode
      await roleOf(replica, 'replica', MARGIN_MS)
      await routed(primary, [replica], MARGIN_MS)
      // The primary shuts down cleanly (its WAL all sent), the replica is promoted on its next
      // loop, the old primary restarts as its replica; HAProxy moves each port within out + in.
      const bound = 2 * LOOP_MS + HAPROXY_OUT_MS + HAPROXY_IN_MS + LOGIN_RETRY_MS + MARGIN_MS
      const result = await underLoad(
        'switchover',
        bound,
        async () => {
          await (run as RunDir).run(
            'patronictl-switchover',
            '/usr/bin/patronictl',
            [
              '-c',
              primary.config,
              'switchover',
              '--leader',
              primary.name,
              '--candidate',
              replica.name,
              '--force',
            ],
            { timeoutMs: bound },
          )
        },
        async () => {
          await roleOf(replica, 'primary', bound)
          await roleOf(primary, 'replica', bound)
          await routed(replica, [primary], bound)
        },
      )
      const why = `2 x loop_wait ${ms(2 * LOOP_MS)} + HAProxy out ${ms(HAPROXY_OUT_MS)} + in ${ms(HAPROXY_IN_MS)} + server_login_retry ${ms(LOGIN_RETRY_MS)} + margin`
      const after = await afterFault('switchover')
      report(
        `patronictl switchover (${primary.name} -> ${replica.name})`,
        `${figures(result, bound, why)}; ${after}`,
        result.late === 0 && result.load.wrong === 0 && result.standbyAnswers === 0,
      )
      holds(result, bound)
    },
    patience(240_000),
  )

  it(
    "a lost host (SIGKILL of the primary's Patroni and PostgreSQL): the replica takes over once the leader key expires",
    async () => {
      const primary = (await leader()) as PatroniNode
      const replica = nodes.find((node) => node !== primary) as PatroniNode
      // The leader key lives ttl; the replica sees it gone on its next loop and promotes itself;
      // HAProxy routes to it after `rise` checks.
      const bound = TTL_MS + LOOP_MS + HAPROXY_IN_MS + LOGIN_RETRY_MS + MARGIN_MS
      const result = await underLoad(
        'lost host',
        bound,
        () => primary.killHost(),
        async () => {
          await roleOf(replica, 'primary', bound)
          await routed(replica, [], bound)
        },
      )
      const why = `ttl ${ms(TTL_MS)} + loop_wait ${ms(LOOP_MS)} + HAProxy in ${ms(HAPROXY_IN_MS)} + server_login_retry ${ms(LOGIN_RETRY_MS)} + margin`
      const after = await afterFault('lost-host')
      report(
        `lost host (${primary.name} killed; ${replica.name} promoted)`,
        `${figures(result, bound, why)}; ${after}`,
        result.late === 0 && result.load.wrong === 0 && result.standbyAnswers === 0,
      )
      holds(result, bound)
    },
    patience(240_000),
  )

  it(
    'the old primary rejoins as a replica (pg_rewind), and no request fails',
    async () => {
      const primary = (await leader()) as PatroniNode
      const old = nodes.find((node) => node !== primary) as PatroniNode
      // Patroni starts, finds another leader, rewinds its data directory and follows; HAProxy adds
      // it to the replicas after `rise` checks. Reads stay on the primary meanwhile.
      const bound = LOOP_MS + HAPROXY_IN_MS + MARGIN_MS
      const result = await underLoad(
        'old primary rejoins',
        bound,
        () => old.start(),
        async () => {
          await roleOf(old, 'replica', bound + MARGIN_MS)
          await routed(primary, [old], bound)
        },
      )
      const log = old.log()
      // Patroni logs `running pg_rewind from <leader>` when the old timeline had gone past the fork.
      const rewound = /running pg_rewind from/.test(log)
      const after = await afterFault('rejoin')
      report(
        `old primary rejoins (${old.name} follows ${primary.name})`,
        `${figures(result, bound, 'loop_wait + HAProxy in + margin')}; its log ${rewound ? 'shows pg_rewind' : 'shows no rewind'}; ${after}`,
        result.load.failures.length <= result.inFlight &&
          result.load.wrong === 0 &&
          result.standbyAnswers === 0,
      )
      expect(result.load.failures.length).toBeLessThanOrEqual(result.inFlight)
      holds(result, bound)
    },
    patience(240_000),
  )

  it(
    'the replica lost, then back: reads move to the primary at once, no request fails',
    async () => {
      const primary = (await leader()) as PatroniNode
      const replica = nodes.find((node) => node !== primary) as PatroniNode
      await roleOf(replica, 'replica', MARGIN_MS)
      const bound = HAPROXY_OUT_MS + MARGIN_MS
      const result = await underLoad(
        'replica lost',
        bound,
        () => replica.killHost(),
        () => routed(primary, [], bound),
      )
      const back = await underLoad(
        'replica back',
        LOOP_MS + HAPROXY_IN_MS + MARGIN_MS,
        () => replica.start(),
        async () => {
          await roleOf(replica, 'replica', LOOP_MS + HAPROXY_IN_MS + 2 * MARGIN_MS)
          await routed(primary, [replica], HAPROXY_IN_MS + MARGIN_MS)
        },
      )
      const after = await afterFault('replica-lost')
      report(
        `replica lost (${replica.name} killed, then started again)`,
        `lost: ${figures(result, bound, 'HAProxy out + margin')}; back: ${figures(back, LOOP_MS + HAPROXY_IN_MS + MARGIN_MS, 'loop_wait + HAProxy in + margin')}; ${after}`,
        result.load.failures.length <= result.inFlight && back.load.failures.length === 0,
      )
      expect(result.load.failures.length).toBeLessThanOrEqual(result.inFlight)
      expect(back.load.failures).toEqual([])
      holds(result, bound)
      holds(back, LOOP_MS + HAPROXY_IN_MS + MARGIN_MS)
    },
    patience(300_000),
  )

  it(
    'etcd lost for a while: the leader demotes itself, nothing is read as the primary from a demoted node, and a leader returns with etcd',
    async () => {
      const primary = (await leader()) as PatroniNode
      // Without etcd the leader cannot renew its key: after loop_wait + retry_timeout it demotes
      // itself (Patroni's failsafe_mode is off). etcd stays away for ttl + 2 x loop_wait, then
      // the nodes elect a leader on their next loop, and HAProxy routes to it.
      const outage = TTL_MS + 2 * LOOP_MS
      const demotedBy = LOOP_MS + DCS.retryTimeout * 1000 + HAPROXY_OUT_MS + MARGIN_MS
      const bound = outage + LOOP_MS + HAPROXY_IN_MS + LOGIN_RETRY_MS + MARGIN_MS
      let demotedMs = Number.NaN
      let noPrimaryMs = Number.NaN
      const result = await underLoad(
        'etcd lost',
        bound,
        async () => {
          const t = performance.now()
          etcd.kill()
          await until(
            `${primary.name} to demote itself`,
            async () => (await primary.role()) !== 'primary',
            demotedBy,
          )
          demotedMs = performance.now() - t
          await routed(undefined, undefined, demotedBy).catch(() => {})
          const up = await pgLb.up()
          if (up.postgres_primary?.length === 0) noPrimaryMs = performance.now() - t
          await sleep(Math.max(0, outage - (performance.now() - t)))
          await etcd.start()
        },
        async () => {
          await until('a leader again', async () => (await leader()) !== undefined, bound)
          const now = (await leader()) as PatroniNode
          await routed(now, undefined, bound)
        },
      )
      const after = await afterFault('etcd-lost')
      report(
        `etcd lost for ${ms(outage)} (leader ${primary.name})`,
        `${figures(result, bound, 'outage + loop_wait + HAProxy in + server_login_retry + margin')}; demoted ${ms(demotedMs)} after etcd went; primary port empty ${ms(noPrimaryMs)} after; ${after}`,
        result.late === 0 && result.load.wrong === 0 && result.standbyAnswers === 0,
      )
      expect(demotedMs).toBeLessThanOrEqual(demotedBy)
      holds(result, bound)
    },
    patience(300_000),
  )

  it(
    "the primary's Patroni killed alone: its PostgreSQL runs on as a primary, HAProxy takes it out, the replica takes over, and the node rejoins when Patroni is back",
    async () => {
      const primary = (await leader()) as PatroniNode
      const replica = nodes.find((node) => node !== primary) as PatroniNode
      await roleOf(replica, 'replica', MARGIN_MS)
      await routed(primary, [replica], MARGIN_MS)
      // No watchdog: the orphaned PostgreSQL keeps running as a primary. HAProxy takes the node
      // out as soon as its REST port refuses (fall checks) and closes the sessions to it
      // (shutdown-sessions); the replica takes the key after ttl and promotes itself.
      const bound = TTL_MS + LOOP_MS + HAPROXY_IN_MS + LOGIN_RETRY_MS + MARGIN_MS
      let orphanPrimary = false
      const result = await underLoad(
        'Patroni killed',
        bound,
        async () => {
          primary.process?.child.kill('SIGKILL')
          await primary.process?.exited
        },
        async () => {
          await roleOf(replica, 'primary', bound)
          await routed(replica, undefined, bound)
          orphanPrimary = !(await primary.inRecovery().catch(() => true))
        },
      )
      // Patroni back: it finds another leader, demotes its PostgreSQL, rewinds it and follows.
      const t = performance.now()
      await primary.start()
      await roleOf(primary, 'replica', LOOP_MS + HAPROXY_IN_MS + 2 * MARGIN_MS)
      await routed(replica, [primary], HAPROXY_IN_MS + MARGIN_MS)
      const rejoinedMs = performance.now() - t
      const why = `ttl ${ms(TTL_MS)} + loop_wait ${ms(LOOP_MS)} + HAProxy in ${ms(HAPROXY_IN_MS)} + server_login_retry ${ms(LOGIN_RETRY_MS)} + margin`
      const after = await afterFault('patroni-killed')
      report(
        `${primary.name}'s Patroni killed alone (${replica.name} promoted)`,
        `${figures(result, bound, why)}; the orphaned PostgreSQL still a primary once ${replica.name} was: ${orphanPrimary}; ` +
          `${primary.name} a replica again ${ms(rejoinedMs)} after its Patroni restarted; ${after}`,
        result.late === 0 && result.load.wrong === 0 && result.standbyAnswers === 0,
      )
      holds(result, bound)
    },
    patience(300_000),
  )
})
