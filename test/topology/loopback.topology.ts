import { existsSync, readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { REQUEST_DEADLINE_MS } from '../../src/store/postgres/postgres.js'
import { LATEST_VERSION } from '../../src/store/schema/schema-version.js'
import { type CliResult, json, openbook } from '../cli/run.js'
import { ROOT } from '../helpers/process.js'
import { type Expected, type LoadReport, runLoad } from './load.js'
import { expectedPages, freePorts } from './pages.js'
import {
  createPrimary,
  createReplica,
  type PgNode,
  postgresBin,
  query,
  urlOf,
  waitForReplay,
} from './postgres.js'
import { buildPreviousRelease, PREVIOUS_RELEASE, type PreviousRelease } from './previous-release.js'
import { ms, n, Summary, say, type Verdict } from './report.js'
import { RunDir, reapStaleRuns } from './run-dir.js'
import {
  API_PASSWORD,
  DOCUMENTED_HAPROXY,
  HAProxy,
  type HAProxySettings,
  Instance,
  PgBouncer,
  QUICK_CHECKS_HAPROXY,
  until,
} from './services.js'

/**
 * The production topology on loopback, built from Debian's packages and the real binaries: a
 * PostgreSQL primary of its own, a streaming replica made with pg_basebackup, PgBouncer in
 * transaction mode in front of both, three `node dist/server.js` instances, and HAProxy with the
 * reference configuration of docs/topology. It proves, with figures, what docs/scaling.md and the
 * README promise of it, and removes every process and directory it made (run-dir.ts).
 *
 * Run with `npm run test:topology` (also run by .ci/run after `npm test`).
 */

/** The bounded load: requests per second and keep-alive connections through the load balancer. */
const RATE = 200
const CONNECTIONS = 16
const SHUTDOWN_DELAY_MS = 2_000
const SEED = 7
/** Between a failover's steps (docs/scaling.md, Failover): the primary is stopped, the replica promoted, PgBouncer repointed. */
const OPERATOR_PAUSE_MS = 1_500
/** Clock granularity between an event's timestamp and a request's: sent within it counts as before. */
const SLACK_MS = 2
/**
 * How long after PgBouncer's return every request then waiting may take to be answered. A new
 * PgBouncer opens its server connections one login at a time per pool (`launch_new_connection`),
 * so the last of 16 waiting requests waits for about the tenth login, longest on a loaded machine
 * (docs/scaling.md). The first 200 must still come within 1 s.
 */
const WAITING_ANSWERED_MS = 2_000

const distHas = (file: string, text: string) =>
  existsSync(`${ROOT}${file}`) && readFileSync(`${ROOT}${file}`, 'utf8').includes(text)
/** DATABASE_READ_URL and `keys revoke --wait-timeout` (the replica parts) in this build. */
const replicaReads = distHas('dist/config.js', 'DATABASE_READ_URL')
const revokeWaits = distHas('dist/cli/commands/keys.js', 'wait-timeout')
const REPLICA_MISSING =
  'this build has no DATABASE_READ_URL (or keys revoke --wait-timeout): the replica checks are skipped'

const summary = new Summary()
let run: RunDir | undefined
let primary: PgNode
let replica: PgNode
let bouncer: PgBouncer
let lb: HAProxy
/** A second HAProxy before the same instances, with an operator's own check settings (QUICK_CHECKS_HAPROXY). */
let quickLb: HAProxy
/** Each store fault runs once through each balancer. */
const BALANCERS: readonly HAProxySettings[] = [DOCUMENTED_HAPROXY, QUICK_CHECKS_HAPROXY]
const balancer = (settings: HAProxySettings) => (settings === DOCUMENTED_HAPROXY ? lb : quickLb)
/** A port for the replica that a failover builds from the new primary (docs/scaling.md, Failover, step 6). */
let spareReplicaPort = 0
let instances: Instance[] = []
let expected: Expected[] = []
let ownerUrl = ''
let previous: PreviousRelease | undefined

/** `openbook` of this checkout, or of `release`'s (the previous release's worktree); fails on an exit other than 0. */
async function cli(args: readonly string[], release: string = ROOT): Promise<CliResult> {
  const result = await openbook(args, { DATABASE_URL: ownerUrl }, undefined, release)
  if (result.code !== 0) throw new Error(`openbook ${args.join(' ')}: exit ${result.code}: ${result.stderr}`)
  return result
}

/** What any run of `migrate` could change for the reader: its grants, the policies, the published version. */
async function readerGrants(url: string): Promise<string> {
  const rows = await query(
    url,
    `SELECT 'table' AS kind, table_name || ' ' || privilege_type AS what FROM information_schema.role_table_grants
       WHERE grantee = 'openbook_reader'
     UNION ALL SELECT 'column', table_name || '.' || column_name || ' ' || privilege_type
       FROM information_schema.column_privileges WHERE grantee = 'openbook_reader'
     UNION ALL SELECT 'function', p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, '')
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
     UNION ALL SELECT 'policy', tablename || '.' || policyname || ' ' || roles::text FROM pg_policies
     UNION ALL SELECT 'version', v::text FROM openbook_schema_version() v
     ORDER BY 1, 2`,
  )
  return JSON.stringify(rows)
}

/** Milliseconds from `since` until HAProxy shows `server` in a state `accept` likes. */
async function lbWait(server: string, accept: (status: string) => boolean, since: number, ms = 15_000) {
  await until(
    `HAProxy to show ${server} changed`,
    async () => {
      const states = await lb.servers().catch(() => ({}) as Record<string, { status: string }>)
      return accept(states[server]?.status ?? '')
    },
    ms,
  )
  return performance.now() - since
}

async function sumMetric(name: string, labels = ''): Promise<number> {
  const values = await Promise.all(instances.map((instance) => instance.metric(name, labels).catch(() => 0)))
  return values.reduce((a, b) => a + b, 0)
}

/**
 * Waits (at most `ms`) until the targets hold a request in flight (their own gauge), so that the
 * event that follows meets work under way; returns what the gauge said (0 after `ms`).
 */
async function whenBusy(targets: readonly Instance[], ms = 3_000): Promise<number> {
  const deadline = performance.now() + ms
  while (performance.now() < deadline) {
    const values = await Promise.all(
      targets.map((target) => target.metric('openbook_http_requests_in_flight').catch(() => 0)),
    )
    const sum = values.reduce((a, b) => a + b, 0)
    if (sum >= 1) return sum
  }
  return 0
}

async function directStatus(instance: Instance, key: string): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${instance.port}/api/public/v1/customers?limit=1`, {
    headers: { authorization: `Bearer ${key}` },
  })
  await response.arrayBuffer()
  return response.status
}

const lbUrl = (via: HAProxy = lb) => `http://127.0.0.1:${via.port}`

function loadFigures(load: LoadReport): string {
  return (
    `${n(load.requests)} requests in ${load.seconds} s: ${n(load.ok)} correct 200s, ${load.wrong} wrong, ` +
    `${load.failures.length} failed; response time p50 ${load.p50.toFixed(1)} / p99 ${load.p99.toFixed(1)} / max ${load.max.toFixed(1)} ms`
  )
}

function failureList(load: LoadReport): string {
  if (load.failures.length === 0) return ''
  const shown = load.failures
    .slice(0, 4)
    .map((f) => `sent +${Math.round(f.start)} ms, answered +${Math.round(f.end)} ms: ${f.what.slice(0, 90)}`)
  return ` [${shown.join('; ')}${load.failures.length > 4 ? `; ${load.failures.length - 4} more` : ''}]`
}

/**
 * What an event (a signal sent at `at`, ms into the load) may cost: only requests already sent
 * then. A request sent after it must succeed. 2 ms allow for the two clocks' granularity.
 */
function eventCost(load: LoadReport, at: number) {
  const inFlight = load.inFlightAt(at, SLACK_MS)
  const after = load.failures.filter((failure) => failure.start > at + SLACK_MS).length
  return {
    inFlight,
    after,
    ok: after === 0 && load.failures.length <= inFlight,
    text: `${load.failures.length} failed of ${inFlight} in flight at +${Math.round(at)} ms, ${after} sent after it`,
  }
}

function verdict(ok: boolean): Verdict {
  return ok ? 'pass' : 'FAIL'
}

/**
 * A load of `seconds` through the load balancer `via` with `event` run once, 2.5 s in, while the
 * instances hold a request: what it cost (eventCost), its 500s, how long the event took and when it
 * ended (`back`, ms into the load: the store is back), and what came after (afterEvent).
 */
async function loadWithEvent(name: string, seconds: number, event: () => Promise<void>, via: HAProxy = lb) {
  let at = 0
  let back = Number.NaN
  let tookMs = Number.NaN
  const load = await runLoad({
    name,
    url: lbUrl(via),
    expected,
    seconds,
    rate: RATE,
    connections: CONNECTIONS,
    async during(elapsed) {
      await sleep(2_500)
      await whenBusy(instances)
      at = elapsed()
      const t = performance.now()
      await event()
      tookMs = performance.now() - t
      back = elapsed()
    },
  })
  const serverErrors = load.failures.filter((f) => f.what.startsWith('500')).length
  return { load, tookMs, back, cost: eventCost(load, at), serverErrors, after: afterEvent(load, back) }
}

/**
 * Once the store is back (`back`, ms into the load): how long until the requests then waiting had
 * all been answered, until the first 200, and until the last failure ended (0 when none did).
 */
function afterEvent(load: LoadReport, back: number) {
  const waiting = load.spans.filter(([start, end]) => start <= back && end > back)
  const recovery = Math.max(0, ...waiting.map(([, end]) => end - back))
  const firstOk = Math.min(...load.okEnds.filter((end) => end >= back).map((end) => end - back))
  const lastFailure = Math.max(0, ...load.failures.map((f) => f.end - back))
  return {
    waiting: waiting.length,
    recovery,
    firstOk,
    lastFailure,
    text: `${waiting.length} waiting when the store came back, all answered ${ms(recovery)} after; first 200 ${ms(firstOk)} after; last failure ${ms(lastFailure)} after`,
  }
}

describe('the production topology on loopback', () => {
  beforeAll(async () => {
    const started = performance.now()
    const missing = ['/usr/sbin/pgbouncer', '/usr/sbin/haproxy'].filter((path) => !existsSync(path))
    if (missing.length > 0)
      throw new Error(
        `missing ${missing.join(', ')}: install Debian's packages (apt-get install -y pgbouncer haproxy; bash .ci/run does)`,
      )
    postgresBin()
    for (const dir of reapStaleRuns()) say(`topology: removed what an earlier run left: ${dir}`)
    run = new RunDir()
    say(`topology: building in ${run.path}${run.identity ? ' (PostgreSQL and PgBouncer as postgres)' : ''}`)
    const [
      primaryPort,
      replicaPort,
      bouncerPort,
      lbPort,
      statsPort,
      quickLbPort,
      quickStatsPort,
      sparePort,
      ...appPorts
    ] = (await freePorts(14)) as [number, number, number, number, number, number, number, number, ...number[]]
    spareReplicaPort = sparePort

    // The rolling upgrade (the first phase) starts from the previous release: it builds while the
    // primary starts, migrates the schema to its own version, and is what the instances run.
    const building = performance.now()
    previous = buildPreviousRelease(run.path)
    const release = previous.root
    say(
      `topology: previous release ${previous.commit.slice(0, 7)} built in ${ms(performance.now() - building)}`,
    )
    primary = await createPrimary(run, primaryPort)
    // The README's production roles: an owner that migrates (and may read pg_stat_replication, so
    // that keys revoke can wait for the standby), and a dedicated login role for the instances.
    await query(primary.url(), 'CREATE ROLE openbook_owner LOGIN CREATEROLE')
    await query(primary.url(), 'GRANT pg_read_all_stats TO openbook_owner')
    await query(primary.url(), 'CREATE DATABASE openbook OWNER openbook_owner')
    ownerUrl = urlOf(primaryPort, 'openbook_owner', 'openbook')
    await cli(['migrate'], release)
    await query(primary.url('openbook'), 'CREATE EXTENSION pg_stat_statements')
    await query(ownerUrl, `CREATE ROLE openbook_api LOGIN PASSWORD '${API_PASSWORD}' IN ROLE openbook_reader`)
    await cli(
      ['seed', '--orgs', '4', '--customers', '20000', '--appointments', '40000', '--seed', String(SEED)],
      release,
    )
    // Seeded plans are random; every organization may have keys here.
    await query(primary.url('openbook'), "UPDATE organizations SET plan = 'enterprise'")
    await cli(
      [
        ...['orgs', 'create', '--name', 'Topology', '--plan', 'enterprise', '--id', 'org_topology'],
        ...['--owner-email', 'ops@topology.example'],
      ],
      release,
    )
    const owners = await query<{ org: string; email: string }>(
      primary.url('openbook'),
      `SELECT m.org_id AS org, u.email FROM memberships m JOIN users u ON u.id = m.user_id
       WHERE m.role = 'owner' AND m.org_id LIKE 'org\\_${SEED}\\_%' ORDER BY m.org_id LIMIT 3`,
    )
    const keys: { org: string; key: string }[] = []
    for (const owner of owners) {
      const created = json<{ key: string }>(
        await cli(
          ['keys', 'create', '--org', owner.org, '--as', owner.email, '--env', 'test', '--json'],
          release,
        ),
      )
      keys.push({ org: owner.org, key: created.key })
    }
    expected = await expectedPages(primary.url('openbook'), keys)

    replica = await createReplica(run, primary, replicaPort)
    await waitForReplay(primary, replica)
    bouncer = new PgBouncer(run, bouncerPort, primaryPort, replicaPort)
    await bouncer.start()
    instances = [0, 1, 2].map(
      (index) =>
        new Instance(
          run as RunDir,
          `app${index + 1}`,
          appPorts[2 * index] ?? 0,
          appPorts[2 * index + 1] ?? 0,
          {
            release,
            databaseUrl: bouncer.url('openbook'),
            readUrl: replicaReads ? bouncer.url('openbook_replica') : undefined,
            shutdownDelayMs: SHUTDOWN_DELAY_MS,
            preparedStatements: 'pooler',
          },
        ),
    )
    await Promise.all(instances.map((instance) => instance.start()))
    lb = new HAProxy(run, lbPort, statsPort, instances)
    quickLb = new HAProxy(run, quickLbPort, quickStatsPort, instances, QUICK_CHECKS_HAPROXY, 'haproxy-quick')
    await Promise.all([lb.start(), quickLb.start()])
    if (!replicaReads || !revokeWaits) {
      say(`topology: ${REPLICA_MISSING}`)
      summary.add('revocation, replica delayed 3 s', REPLICA_MISSING, 'skipped')
      if (!replicaReads) summary.add('replica stopped, then restarted', REPLICA_MISSING, 'skipped')
    }
    summary.add(
      'topology up',
      `primary :${primaryPort}, replica :${replicaPort} (pg_basebackup -R), PgBouncer :${bouncerPort}, ` +
        `3 instances :${instances.map((i) => i.port).join('/:')}, HAProxy :${lbPort}; ` +
        `${keys.length} organizations, ${expected.length} distinct requests; ` +
        `reads on the ${replicaReads ? 'replica (DATABASE_READ_URL)' : 'primary'}; built in ${ms(performance.now() - started)}`,
      'pass',
    )
  }, patience(240_000))

  afterAll(async () => {
    summary.print('Topology test: summary')
    const dir = run?.path
    const keep = process.env.TOPOLOGY_KEEP_LOGS
    await run?.close(5_000, keep)
    previous?.remove()
    if (dir) say(`topology: stopped every process and removed ${dir}${keep ? ` (logs kept in ${keep})` : ''}`)
  }, patience(60_000))

  it(
    'a rolling upgrade from the previous release, a rollback and the old migrate on the new schema fail no request',
    async () => {
      const old = (previous as PreviousRelease).root
      const steps: string[] = []
      let oldMigrate: CliResult | undefined
      let grantsBefore = ''
      let grantsAfter = ''
      let applied: string[] = []
      let rolledBack = 0
      const load = await runLoad({
        name: 'rolling upgrade',
        url: lbUrl(),
        expected,
        seconds: 32,
        rate: RATE,
        connections: CONNECTIONS,
        async during(elapsed) {
          await sleep(2_000)
          // 1. The new release's migrate, while the previous release serves.
          applied = json<{ applied: string[] }>(await cli(['migrate', '--json'])).applied
          steps.push(`migrate ${applied.join(', ')} at +${ms(elapsed())}`)
          await sleep(1_500)
          // 2. The instances replaced one by one: SIGTERM, drain, the new release on the same ports.
          for (const instance of instances) {
            const t = performance.now()
            await instance.replaceWith(ROOT)
            await lbWait(instance.name, (status) => status === 'UP', t)
            steps.push(`${instance.name} new at +${ms(elapsed())}`)
          }
          // 3. The previous release's migrate, as a rollback's deploy step would run it.
          grantsBefore = await readerGrants(primary.url('openbook'))
          oldMigrate = await openbook(['migrate'], { DATABASE_URL: ownerUrl }, undefined, old)
          grantsAfter = await readerGrants(primary.url('openbook'))
          // 4. A rollback of one instance: the previous release serves the new schema, then forward again.
          const back = instances[0] as Instance
          let t = performance.now()
          await back.replaceWith(old)
          await lbWait(back.name, (status) => status === 'UP', t)
          rolledBack = await directStatus(back, expected[0]?.key ?? '')
          steps.push(`${back.name} rolled back at +${ms(elapsed())} (direct request: ${rolledBack})`)
          t = performance.now()
          await back.replaceWith(ROOT)
          await lbWait(back.name, (status) => status === 'UP', t)
          steps.push(`${back.name} new again at +${ms(elapsed())}`)
        },
      })
      const refusal = `openbook: the schema is at version ${LATEST_VERSION}; this openbook knows up to ${(previous as PreviousRelease).latestVersion}: upgrade openbook\n`
      const ok =
        load.failures.length === 0 &&
        load.wrong === 0 &&
        applied.length > 0 &&
        oldMigrate?.code === 1 &&
        oldMigrate.stderr === refusal &&
        grantsAfter === grantsBefore &&
        rolledBack === 200 &&
        instances.every((instance) => instance.release === ROOT)
      summary.add(
        `rolling upgrade from ${PREVIOUS_RELEASE.slice(0, 7)} (${RATE}/s, 32 s)`,
        `${loadFigures(load)}; ${steps.join('; ')}; old migrate exit ${oldMigrate?.code}: ${oldMigrate?.stderr.trim()}; ` +
          `reader's grants ${grantsAfter === grantsBefore ? 'unchanged' : 'CHANGED'}${failureList(load)}` +
          (load.firstWrong ? `; first wrong: ${load.firstWrong}` : ''),
        verdict(ok),
      )
      expect(applied.length).toBeGreaterThan(0)
      expect(load.failures).toEqual([])
      expect(load.wrong).toBe(0)
      expect(oldMigrate?.code).toBe(1)
      expect(oldMigrate?.stderr).toBe(refusal)
      expect(grantsAfter).toBe(grantsBefore)
      expect(rolledBack).toBe(200)
    },
    patience(150_000),
  )

  it(
    'serves a bounded read load through the load balancer: every response a correct 200, each page statement planned once per server connection',
    async () => {
      const servers = [primary, replica]
      for (const server of servers) await query(server.url('openbook'), 'SELECT pg_stat_statements_reset()')
      const before = await lb.servers()
      const tx0 = await bouncer.transactions()
      const load = await runLoad({
        name: 'steady',
        url: lbUrl(),
        expected,
        seconds: 15,
        rate: RATE,
        connections: CONNECTIONS,
      })
      const after = await lb.servers()
      const tx1 = await bouncer.transactions()
      const perInstance = instances.map((i) => (after[i.name]?.sent ?? 0) - (before[i.name]?.sent ?? 0))
      const replicaTx = (tx1.openbook_replica ?? 0) - (tx0.openbook_replica ?? 0)
      const primaryTx = (tx1.openbook ?? 0) - (tx0.openbook ?? 0)
      // The pages' statements (PREPAREd by openbook_prepare, EXECUTEd at the top level): how often
      // they ran and how often PostgreSQL planned them, on both servers.
      let pages = { calls: 0, plans: 0 }
      for (const server of servers) {
        const [row] = await query<{ calls: number; plans: number }>(
          server.url('openbook'),
          `SELECT coalesce(sum(calls), 0)::int AS calls, coalesce(sum(plans), 0)::int AS plans
         FROM pg_stat_statements
         WHERE query LIKE '% t AS MATERIALIZED (%' AND query NOT LIKE '%openbook_prepare%'`,
        )
        pages = { calls: pages.calls + (row?.calls ?? 0), plans: pages.plans + (row?.plans ?? 0) }
      }
      const ok =
        load.failures.length === 0 &&
        load.wrong === 0 &&
        load.ok > RATE * 12 &&
        perInstance.every((count) => count > 0) &&
        (!replicaReads || replicaTx >= load.ok) &&
        pages.calls >= load.ok &&
        pages.plans * 10 <= pages.calls
      summary.add(
        `steady load (${RATE}/s, ${CONNECTIONS} conns, 15 s)`,
        `${loadFigures(load)}; per instance ${perInstance.map(n).join(' / ')}; ` +
          `PgBouncer transactions: replica ${n(replicaTx)}, primary ${n(primaryTx)}; ` +
          `page statements run ${n(pages.calls)} times, planned ${n(pages.plans)} times${failureList(load)}` +
          (load.firstWrong ? `; first wrong: ${load.firstWrong}` : ''),
        verdict(ok),
      )
      expect(load.failures).toEqual([])
      expect(load.wrong).toBe(0)
      expect(load.ok).toBeGreaterThan(RATE * 12)
      for (const count of perInstance) expect(count).toBeGreaterThan(0)
      if (replicaReads) expect(replicaTx).toBeGreaterThanOrEqual(load.ok)
      // DATABASE_PREPARED_STATEMENTS=pooler: each server connection plans a page's statement once
      // (and again after an invalidation, such as an ANALYZE replayed from the primary), not per
      // request as unnamed statements are (plans = calls).
      expect(pages.calls).toBeGreaterThanOrEqual(load.ok)
      expect(pages.plans * 10).toBeLessThanOrEqual(pages.calls)
    },
    patience(90_000),
  )

  it(
    'SIGKILL of an instance mid-load fails no request beyond those it held; the LB routes around it',
    async () => {
      const victim = instances[0] as Instance
      let held = 0
      let downMs = Number.NaN
      let backMs = Number.NaN
      let killedAt = 0
      let sentWhileDown = Number.NaN
      const load = await runLoad({
        name: 'sigkill',
        url: lbUrl(),
        expected,
        seconds: 11,
        rate: RATE,
        connections: CONNECTIONS,
        async during(elapsed) {
          await sleep(4_000)
          held = await whenBusy([victim])
          const t = performance.now()
          killedAt = elapsed()
          victim.signal('SIGKILL')
          downMs = await lbWait(victim.name, (status) => status.startsWith('DOWN'), t)
          const sentAtDown = (await lb.servers())[victim.name]?.sent ?? 0
          await victim.process?.exited
          await sleep(2_000)
          sentWhileDown = ((await lb.servers())[victim.name]?.sent ?? 0) - sentAtDown
          const restart = performance.now()
          await victim.start()
          backMs = await lbWait(victim.name, (status) => status === 'UP', restart)
        },
      })
      const cost = eventCost(load, killedAt)
      const ok = cost.ok && load.wrong === 0 && sentWhileDown === 0
      summary.add(
        'SIGKILL one instance mid-load',
        `${loadFigures(load)}; SIGKILL while it held ${held} (its gauge): ${cost.text}; ` +
          `HAProxy marked it DOWN after ${ms(downMs)}, sent it ${sentWhileDown} requests while down; ` +
          `restarted, UP again after ${ms(backMs)}; HAProxy retries so far ${lb.retries()}${failureList(load)}`,
        verdict(ok),
      )
      expect(cost.after).toBe(0)
      expect(load.failures.length).toBeLessThanOrEqual(cost.inFlight)
      expect(load.wrong).toBe(0)
      expect(sentWhileDown).toBe(0)
    },
    patience(60_000),
  )

  it(
    'a SIGTERMed instance drains with no failed request: readiness turns off first',
    async () => {
      const victim = instances[1] as Instance
      let readyOffMs = Number.NaN
      let downMs = Number.NaN
      let exitMs = Number.NaN
      let exitCode: number | null = null
      let backMs = Number.NaN
      const load = await runLoad({
        name: 'sigterm',
        url: lbUrl(),
        expected,
        seconds: 11,
        rate: RATE,
        connections: CONNECTIONS,
        async during() {
          await sleep(3_000)
          const exited = victim.process?.exited
          const t = performance.now()
          victim.signal('SIGTERM')
          await Promise.all([
            until('readyz to turn 503', async () => (await victim.ready()) === 503, 5_000).then(() => {
              readyOffMs = performance.now() - t
            }),
            lbWait(victim.name, (status) => status.startsWith('DOWN'), t).then((value) => {
              downMs = value
            }),
            exited?.then((code) => {
              exitCode = code
              exitMs = performance.now() - t
            }),
          ])
          const restart = performance.now()
          await victim.start()
          backMs = await lbWait(victim.name, (status) => status === 'UP', restart)
        },
      })
      const ok =
        load.failures.length === 0 && load.wrong === 0 && exitCode === 0 && downMs < SHUTDOWN_DELAY_MS
      summary.add(
        'SIGTERM one instance mid-load',
        `${loadFigures(load)}; /readyz 503 after ${ms(readyOffMs)}, HAProxy DOWN after ${ms(downMs)} ` +
          `(SHUTDOWN_DELAY_MS ${SHUTDOWN_DELAY_MS}), exit ${exitCode} after ${ms(exitMs)}; ` +
          `restarted, UP again after ${ms(backMs)}${failureList(load)}`,
        verdict(ok),
      )
      expect(load.failures).toEqual([])
      expect(load.wrong).toBe(0)
      expect(exitCode).toBe(0)
      expect(downMs).toBeLessThan(SHUTDOWN_DELAY_MS)
    },
    patience(60_000),
  )

  it.skipIf(!replicaReads || !revokeWaits)(
    'a key revoked through the CLI is refused by all three instances on the next request, the replica 3 s behind',
    async () => {
      const created = json<{ id: string; key: string }>(
        await cli([
          'keys',
          'create',
          '--org',
          'org_topology',
          '--as',
          'ops@topology.example',
          '--env',
          'test',
          '--json',
        ]),
      )
      await waitForReplay(primary, replica)
      const before = await Promise.all(instances.map((instance) => directStatus(instance, created.key)))
      expect(before).toEqual([200, 200, 200])

      await query(replica.url(), "ALTER SYSTEM SET recovery_min_apply_delay = '3s'")
      await query(replica.url(), 'SELECT pg_reload_conf()')
      await until(
        'the replica to delay its replay',
        async () =>
          (
            await query<{ value: string }>(
              replica.url(),
              "SELECT current_setting('recovery_min_apply_delay') AS value",
            )
          )[0]?.value === '3s',
        5_000,
      )
      try {
        const t = performance.now()
        let replicaAppliedMs = Number.NaN
        let acceptedWhileWaiting = 0
        let done = false
        const revokedOnReplica = async () =>
          (
            await query<{ revoked: boolean }>(
              replica.url('openbook'),
              'SELECT revoked_at IS NOT NULL AS revoked FROM api_keys WHERE id = $1',
              [created.id],
            )
          )[0]?.revoked === true
        const watchReplica = (async () => {
          while (!done) {
            if (await revokedOnReplica()) {
              replicaAppliedMs = performance.now() - t
              return
            }
            // An instance reading keys on the replica still sees the key as active meanwhile.
            if ((await directStatus(instances[2] as Instance, created.key)) === 200) acceptedWhileWaiting++
            await sleep(100)
          }
        })()
        const revoked = json<{ replication: { lsn: string; standbys: { name: string; seconds: number }[] } }>(
          await cli(['keys', 'revoke', created.id, '--wait-timeout', '20', '--json']),
        )
        const cliMs = performance.now() - t
        // The command returns once the replica has applied the revocation: read there first. (The
        // watcher, polling every 100 ms, may see it only after the command returned.)
        const appliedOnReturn = await revokedOnReplica()
        const next = performance.now()
        const after = await Promise.all(instances.map((instance) => directStatus(instance, created.key)))
        const nextMs = performance.now() - next
        const viaLb = await fetch(`${lbUrl()}/api/public/v1/customers?limit=1`, {
          headers: { authorization: `Bearer ${created.key}` },
        })
        await viaLb.arrayBuffer()
        done = true
        await watchReplica
        const standbys = revoked.replication.standbys
          .map((s) => `${s.name} in ${s.seconds.toFixed(2)} s`)
          .join(', ')
        const ok =
          after.every((status) => status === 401) &&
          viaLb.status === 401 &&
          revoked.replication.standbys.length === 1 &&
          appliedOnReturn
        summary.add(
          'revocation, replica delayed 3 s',
          `keys revoke returned after ${ms(cliMs)}, having waited for ${standbys || 'no standby'} ` +
            `(WAL ${revoked.replication.lsn}); the replica applied it ` +
            `${Number.isNaN(replicaAppliedMs) ? 'before the command returned (between two polls)' : `after ${ms(replicaAppliedMs)}`}` +
            `${appliedOnReturn ? '' : ', NOT when the command returned'}; ` +
            `meanwhile an instance still accepted the key ${acceptedWhileWaiting} times (why revoke waits); ` +
            `next request: ${after.join(' / ')} in ${ms(nextMs)}, via HAProxy ${viaLb.status}`,
          verdict(ok),
        )
        expect(after).toEqual([401, 401, 401])
        expect(viaLb.status).toBe(401)
        expect(revoked.replication.standbys).toHaveLength(1)
        expect(appliedOnReturn).toBe(true)
      } finally {
        await query(replica.url(), 'ALTER SYSTEM RESET recovery_min_apply_delay')
        await query(replica.url(), 'SELECT pg_reload_conf()')
        await waitForReplay(primary, replica)
      }
    },
    60_000,
  )

  it.skipIf(!replicaReads)(
    'stopping the replica moves reads to the primary with no 5xx beyond in flight; restarting it brings them back',
    async () => {
      const fallbacks0 = await sumMetric('openbook_replica_fallbacks_total')
      let held = 0
      let stoppedAt = 0
      let stopMs = Number.NaN
      let fallbackMs = Number.NaN
      let primaryRate = Number.NaN
      let startMs = Number.NaN
      let backMs = Number.NaN
      const load = await runLoad({
        name: 'replica',
        url: lbUrl(),
        expected,
        seconds: 18,
        rate: RATE,
        connections: CONNECTIONS,
        async during(elapsed) {
          await sleep(3_000)
          held = await whenBusy(instances)
          const t = performance.now()
          stoppedAt = elapsed()
          const stopping = replica.stop().then(() => {
            stopMs = performance.now() - t
          })
          await until(
            'a read to fall back to the primary',
            async () => (await sumMetric('openbook_replica_fallbacks_total')) > fallbacks0,
            5_000,
          )
          fallbackMs = performance.now() - t
          await stopping
          // Reads per second the primary serves meanwhile (PgBouncer's count of transactions).
          const p0 = (await bouncer.transactions()).openbook ?? 0
          await sleep(2_000)
          primaryRate = (((await bouncer.transactions()).openbook ?? 0) - p0) / 2
          await sleep(3_000)
          const restart = performance.now()
          await replica.start()
          startMs = performance.now() - restart
          // Back: the replica serves the load again (at least a quarter of its rate in 250 ms).
          await until(
            'reads to come back to the replica',
            async () => {
              const r0 = (await bouncer.transactions()).openbook_replica ?? 0
              await sleep(250)
              return ((await bouncer.transactions()).openbook_replica ?? 0) - r0 >= RATE / 16
            },
            10_000,
          )
          backMs = performance.now() - restart
        },
      })
      const fallbacks = (await sumMetric('openbook_replica_fallbacks_total')) - fallbacks0
      const serverErrors = load.failures.filter((failure) => /^5\d\d /.test(failure.what)).length
      const cost = eventCost(load, stoppedAt)
      const ok = cost.ok && load.wrong === 0 && fallbacks > 0
      summary.add(
        'replica stopped, then restarted',
        `${loadFigures(load)}; replica stopped (fast shutdown, ${ms(stopMs)}) while the instances held ${held}: ${cost.text}; ` +
          `first read on the primary after ${ms(fallbackMs)}; primary served ${n(Math.round(primaryRate))} tx/s meanwhile; ` +
          `${n(fallbacks)} reads fell back (openbook_replica_fallbacks_total); 5xx ${serverErrors}; ` +
          `replica restarted in ${ms(startMs)}, reads back on it ${ms(backMs)} after the restart began${failureList(load)}`,
        verdict(ok),
      )
      expect(cost.after).toBe(0)
      expect(load.failures.length).toBeLessThanOrEqual(cost.inFlight)
      expect(load.wrong).toBe(0)
      expect(fallbacks).toBeGreaterThan(0)
      // A read caught by the replica going away moves to the primary within its 2 s cap, never
      // waits out the pooler's query_wait_timeout (10 s) as it once did (11.1 s).
      expect(load.max).toBeLessThan(REQUEST_DEADLINE_MS)
    },
    60_000,
  )

  it(
    'an online restart of PgBouncer (pgbouncer -R) under load fails no request',
    async () => {
      const pids = instances.map((instance) => instance.pid)
      let held = 0
      let at = 0
      let handoverMs = Number.NaN
      const load = await runLoad({
        name: 'pgbouncer-online',
        url: lbUrl(),
        expected,
        seconds: 10,
        rate: RATE,
        connections: CONNECTIONS,
        async during(elapsed) {
          await sleep(3_000)
          held = await whenBusy(instances)
          const t = performance.now()
          at = elapsed()
          await bouncer.onlineRestart()
          handoverMs = performance.now() - t
        },
      })
      const cost = eventCost(load, at)
      const samePids = instances.every((instance, index) => instance.pid === pids[index])
      const ok = load.failures.length === 0 && load.wrong === 0 && samePids
      summary.add(
        'PgBouncer online restart (-R) mid-load',
        `${loadFigures(load)}; started while the instances held ${held} (${cost.inFlight} in flight at the LB); the old one handed ` +
          `its sockets over and exited after ${ms(handoverMs)}; instances not restarted: ${samePids}${failureList(load)}`,
        verdict(ok),
      )
      expect(load.failures).toEqual([])
      expect(load.wrong).toBe(0)
      expect(samePids).toBe(true)
    },
    patience(60_000),
  )

  for (const settings of BALANCERS)
    it(
      `PgBouncer down for 0.1 s, 1.5 s and 5 s (${settings.label}): requests wait it out; failures at most those in flight, each a 503 from an instance; the first 200 within 1 s, every waiting request answered within 2 s`,
      async () => {
        const pids = instances.map((instance) => instance.pid)
        const events: { downFor: number; at: number; back: number; readyDuring: number[] }[] = []
        const load = await runLoad({
          name: `pgbouncer outages (${settings.label})`,
          url: lbUrl(balancer(settings)),
          expected,
          seconds: 20,
          rate: RATE,
          connections: CONNECTIONS,
          async during(elapsed) {
            for (const [wait, downFor] of [
              [2_000, 100],
              [2_500, 1_500],
              [2_500, 5_000],
            ] as const) {
              await sleep(wait)
              await whenBusy(instances)
              const at = elapsed()
              await bouncer.stop()
              // Every instance's readiness while the shared pooler is gone (5 s): 200, so HAProxy keeps them.
              let readyDuring: number[] = []
              if (downFor >= 5_000) {
                await sleep(1_500)
                readyDuring = await Promise.all(instances.map((i) => i.ready()))
              }
              const left = at + downFor - elapsed()
              if (left > 0) await sleep(left)
              await bouncer.start()
              events.push({ downFor, at, back: elapsed(), readyDuring })
            }
          },
        })
        // A failure counts against the outage it overlaps (up to 1 s after PgBouncer is back).
        const during = (f: { start: number; end: number }, event: { at: number; back: number }) =>
          f.end >= event.at - SLACK_MS && f.start <= event.back + 1_000
        const outside = load.failures.filter((f) => !events.some((event) => during(f, event))).length
        const rows = events.map((event) => {
          const failures = load.failures.filter((f) => during(f, event))
          const inFlight = load.inFlightAt(event.at, SLACK_MS)
          // Requests waiting when the pooler came back: how long after its return the last of them ended.
          const waiting = load.spans.filter(([start, end]) => start <= event.back && end > event.back)
          const recovery = Math.max(0, ...waiting.map(([, end]) => end - event.back))
          const firstOk = Math.min(
            ...load.okEnds.filter((end) => end >= event.back).map((end) => end - event.back),
          )
          const instance503 = failures.every(
            (f) => f.what.startsWith('503 ') && f.what.includes('service_unavailable'),
          )
          return {
            ...event,
            failures: failures.length,
            inFlight,
            recovery,
            firstOk,
            instance503,
            waiting: waiting.length,
          }
        })
        const samePids = instances.every((instance, index) => instance.pid === pids[index])
        const serverErrors = load.failures.filter((f) => f.what.startsWith('500')).length
        const ok =
          load.wrong === 0 &&
          serverErrors === 0 &&
          outside === 0 &&
          samePids &&
          rows.every(
            (row) =>
              row.failures <= row.inFlight &&
              row.instance503 &&
              row.recovery <= WAITING_ANSWERED_MS &&
              row.firstOk <= 1_000 &&
              row.readyDuring.every((status) => status === 200),
          )
        summary.add(
          `PgBouncer down 0.1 s / 1.5 s / 5 s (${settings.label})`,
          `${loadFigures(load)}; ` +
            rows
              .map(
                (row) =>
                  `down ${ms(row.downFor)} at +${ms(row.at)}: ${row.failures} failed of ${row.inFlight} in flight, ` +
                  `${row.waiting} waiting when it came back, all answered ${ms(row.recovery)} after, first 200 ${ms(row.firstOk)} after` +
                  (row.readyDuring.length ? `, /readyz during it ${row.readyDuring.join('/')}` : ''),
              )
              .join('; ') +
            `; ${outside} failed outside the outages; 500s ${serverErrors}; instances not restarted: ${samePids}${failureList(load)}`,
          verdict(ok),
        )
        expect(load.wrong).toBe(0)
        expect(serverErrors).toBe(0)
        expect(outside, 'failures outside the outages').toBe(0)
        expect(samePids).toBe(true)
        for (const row of rows) {
          expect(row.failures, `down ${row.downFor} ms`).toBeLessThanOrEqual(row.inFlight)
          expect(row.instance503, `down ${row.downFor} ms: failures from the instances`).toBe(true)
          expect(row.recovery, `down ${row.downFor} ms: recovery`).toBeLessThanOrEqual(WAITING_ANSWERED_MS)
          expect(row.firstOk, `down ${row.downFor} ms: first 200`).toBeLessThanOrEqual(1_000)
          for (const status of row.readyDuring) expect(status).toBe(200)
        }
      },
      patience(90_000),
    )

  for (const settings of BALANCERS)
    it(
      `the primary restarted (fast shutdown, start; ${settings.label}): at most the requests in flight fail, none after; served again within 1 s`,
      async () => {
        const {
          load,
          tookMs: downMs,
          cost,
          serverErrors,
          after,
        } = await loadWithEvent(
          `primary restart (${settings.label})`,
          10,
          async () => {
            await primary.stop()
            await primary.start()
          },
          balancer(settings),
        )
        const ok =
          cost.ok &&
          load.wrong === 0 &&
          serverErrors === 0 &&
          after.recovery <= 1_000 &&
          after.firstOk <= 1_000
        summary.add(
          `primary restarted (pg_ctl restart -m fast; ${settings.label})`,
          `${loadFigures(load)}; down ${ms(downMs)}: ${cost.text}; ${after.text}; 500s ${serverErrors}${failureList(load)}`,
          verdict(ok),
        )
        expect(cost.after).toBe(0)
        expect(load.failures.length).toBeLessThanOrEqual(cost.inFlight)
        expect(serverErrors).toBe(0)
        expect(load.wrong).toBe(0)
        expect(after.recovery).toBeLessThanOrEqual(1_000)
        expect(after.firstOk).toBeLessThanOrEqual(1_000)
      },
      patience(60_000),
    )

  it(
    'the default DATABASE_PREPARED_STATEMENTS behind PgBouncer: instances switch to pooler with one warning, no request fails',
    async () => {
      // app1 keeps `pooler`, app2 and app3 restart with the default: the failover that follows
      // meets both settings behind the balancer.
      const restarted = instances.slice(1)
      const steps: string[] = []
      const load = await runLoad({
        name: 'default prepared statements',
        url: lbUrl(),
        expected,
        seconds: 20,
        rate: RATE,
        connections: CONNECTIONS,
        async during(elapsed) {
          await sleep(1_000)
          for (const instance of restarted) {
            const t = performance.now()
            await instance.replaceWith(ROOT, 'default')
            await lbWait(instance.name, (status) => status === 'UP', t)
            steps.push(`${instance.name} at +${ms(elapsed())}`)
          }
        },
      })
      const warnings = instances.map(
        (instance) =>
          readFileSync(instance.process?.log ?? '', 'utf8')
            .split('\n')
            .filter((line) => line.includes('met a pooler in transaction mode')).length,
      )
      const serverErrors = load.failures.filter((f) => f.what.startsWith('500')).length
      const ok = load.failures.length === 0 && load.wrong === 0 && warnings.join() === '0,1,1'
      summary.add(
        'default prepared statements behind PgBouncer (app2, app3)',
        `${loadFigures(load)}; restarted with the default: ${steps.join(', ')}; warnings per instance ${warnings.join('/')}; ` +
          `500s ${serverErrors}${failureList(load)}`,
        verdict(ok),
      )
      expect(load.failures).toEqual([])
      expect(load.wrong).toBe(0)
      expect(warnings).toEqual([0, 1, 1])
    },
    patience(90_000),
  )

  for (const [index, settings] of BALANCERS.entries())
    it(
      `failover (${settings.label}): the primary stops, the replica is promoted and PgBouncer pointed at it; at most the requests in flight fail, the last within 2 s of the reload; revocation and last-used resume without restarting an instance`,
      async () => {
        if (index > 0) {
          // The runbook's last step after the previous failover: a new replica from the new
          // primary, and openbook_replica pointed at it. It is what this failover promotes.
          const rebuilt = performance.now()
          const next = await createReplica(run as RunDir, primary, spareReplicaPort, `replica${index + 1}`)
          await waitForReplay(primary, next)
          await bouncer.repoint(next.port, 'openbook_replica')
          replica = next
          say(`topology: replica rebuilt from the new primary in ${ms(performance.now() - rebuilt)}`)
        }
        const pids = instances.map((instance) => instance.pid)
        // The operator's runbook (docs/scaling.md, Failover), step by step.
        const {
          load,
          tookMs: switchedMs,
          cost,
          serverErrors,
          after,
        } = await loadWithEvent(
          `failover (${settings.label})`,
          // Long enough after the reload to see requests still failing there, as they once did for 15 s.
          20,
          async () => {
            await primary.stop()
            // An operator's pace, not a script's: the old primary confirmed down, then the replica promoted.
            await sleep(OPERATOR_PAUSE_MS)
            await query(replica.url(), 'SELECT pg_promote(true, 30)')
            await sleep(OPERATOR_PAUSE_MS)
            await bouncer.repoint(replica.port)
          },
          balancer(settings),
        )
        primary = replica
        // The new primary takes the operator's commands: a key revoked there is refused everywhere.
        ownerUrl = urlOf(primary.port, 'openbook_owner', 'openbook')
        const created = json<{ id: string; key: string }>(
          await cli([
            ...['keys', 'create', '--org', 'org_topology', '--as', 'ops@topology.example'],
            ...['--env', 'test', '--json'],
          ]),
        )
        const beforeRevoke = await Promise.all(
          instances.map((instance) => directStatus(instance, created.key)),
        )
        await cli(['keys', 'revoke', created.id])
        const afterRevoke = await Promise.all(
          instances.map((instance) => directStatus(instance, created.key)),
        )
        const other = expected[0]?.key ?? ''
        const stillServing = await Promise.all(instances.map((instance) => directStatus(instance, other)))
        // Last-used writes go to the new primary again: the flush's failures stop growing.
        const failuresBefore = await sumMetric('openbook_last_used_flush_failures_total')
        await sleep(2_500)
        const failuresAfter = await sumMetric('openbook_last_used_flush_failures_total')
        const samePids = instances.every((instance, i) => instance.pid === pids[i])
        const ok =
          cost.ok &&
          load.wrong === 0 &&
          serverErrors === 0 &&
          after.lastFailure <= 2_000 &&
          after.firstOk <= 1_000 &&
          beforeRevoke.every((status) => status === 200) &&
          afterRevoke.every((status) => status === 401) &&
          stillServing.every((status) => status === 200) &&
          failuresAfter === failuresBefore &&
          samePids
        summary.add(
          `failover to the promoted replica (${settings.label}; app1 pooler, app2-3 the default)`,
          `${loadFigures(load)}; primary stopped, replica promoted, PgBouncer reloaded in ${ms(switchedMs)}: ${cost.text}; ` +
            `after the reload: ${after.text}; 500s ${serverErrors}; a key made on the new primary ${beforeRevoke.join('/')}, ` +
            `revoked there, then ${afterRevoke.join('/')}; other keys ${stillServing.join('/')}; ` +
            `last-used flush failures ${failuresBefore} -> ${failuresAfter} over 2.5 s; instances not restarted: ${samePids}${failureList(load)}`,
          verdict(ok),
        )
        expect(cost.after).toBe(0)
        expect(load.failures.length).toBeLessThanOrEqual(cost.inFlight)
        expect(after.lastFailure).toBeLessThanOrEqual(2_000)
        expect(after.firstOk).toBeLessThanOrEqual(1_000)
        expect(serverErrors).toBe(0)
        expect(load.wrong).toBe(0)
        expect(beforeRevoke).toEqual([200, 200, 200])
        expect(afterRevoke).toEqual([401, 401, 401])
        expect(stillServing).toEqual([200, 200, 200])
        expect(failuresAfter).toBe(failuresBefore)
        expect(samePids).toBe(true)
      },
      patience(120_000),
    )
})
