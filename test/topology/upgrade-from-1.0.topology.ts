import { createConnection } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CliResult, json, openbook } from '../cli/run.js'
import { freePort, ROOT } from '../helpers/process.js'
import { type Expected, type LoadReport, runLoad } from './load.js'
import { createPrimary, type PgNode, postgresBin, query, urlOf } from './postgres.js'
import { buildRelease, type PreviousRelease } from './previous-release.js'
import { ms, n, say } from './report.js'
import { RunDir, reapStaleRuns } from './run-dir.js'
import { HAProxy, type HAProxySettings, Instance, until } from './services.js'

/**
 * The upgrade from 1.0.0, the release before the version rules, as docs/operators/upgrading-from-1.0.md
 * writes it, under load through HAProxy with the reference configuration: 1.0.0 serves only
 * schema version 7, and its /readyz turns 503 once a newer release has migrated, although it goes
 * on answering requests (every migration up to 1.1.0's declares that release 7 serves it). So the
 * balancer's checks of the 1.0.0 instances are switched off for the time of the procedure
 * (HAProxy's runtime API), and each instance is drained, replaced and checked again in turn.
 * Then 1.1.0 goes to this release by an ordinary rolling upgrade. The figures: requests failed.
 *
 * Run with `npx vitest run --config vitest.topology.config.ts test/topology/upgrade-from-1.0.topology.ts`.
 */

const RATE = 100
const CONNECTIONS = 4
const SHUTDOWN_DELAY_MS = 1_000

/** The reference haproxy.conf with the runtime API on a Unix socket, which the procedure drives. */
const withAdminSocket = (socket: string): HAProxySettings => ({
  label: 'documented haproxy.conf, with a stats socket, two servers',
  edit(text) {
    if (!/^global\n/m.test(text)) throw new Error('docs/topology/haproxy.conf has no global section')
    // Two instances here: the reference's third server goes.
    return text
      .replace(/^global\n/m, `global\n    stats socket ${socket} mode 600 level admin\n`)
      .replace(/^ *server app3 .*\n/m, '')
  },
})

/** One command on HAProxy's runtime API; its answer. */
function haproxyCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = ''
    const connection = createConnection(socket, () => connection.end(`${command}\n`))
    connection.on('data', (chunk) => {
      answer += chunk.toString()
    })
    connection.on('error', reject)
    connection.on('close', () => resolve(answer.trim()))
  })
}

let run: RunDir | undefined
let primary: PgNode
let ownerUrl = ''
let first: PreviousRelease | undefined
let second: PreviousRelease | undefined
let instances: Instance[] = []
let lb: HAProxy
let socket = ''
const expected: Expected[] = []

async function cli(args: readonly string[], release: string): Promise<CliResult> {
  const result = await openbook(args, { DATABASE_URL: ownerUrl }, undefined, release)
  if (result.code !== 0) throw new Error(`openbook ${args.join(' ')}: exit ${result.code}: ${result.stderr}`)
  return result
}

describe('the upgrade from 1.0.0 (before the version rules), under load through HAProxy', () => {
  beforeAll(async () => {
    postgresBin()
    for (const dir of reapStaleRuns()) say(`upgrade-from-1.0: removed what an earlier run left: ${dir}`)
    run = new RunDir()
    const [primaryPort, lbPort, statsPort, ...appPorts] = (await Promise.all(
      Array.from({ length: 7 }, () => freePort()),
    )) as [number, number, number, ...number[]]
    const building = performance.now()
    first = buildRelease(run.path, 'v1.0.0')
    second = buildRelease(run.path, 'v1.1.0')
    say(`upgrade-from-1.0: v1.0.0 and v1.1.0 built in ${ms(performance.now() - building)}`)
    primary = await createPrimary(run, primaryPort)
    await query(primary.url(), 'CREATE ROLE openbook_owner LOGIN CREATEROLE')
    await query(primary.url(), 'CREATE DATABASE openbook OWNER openbook_owner')
    ownerUrl = urlOf(primaryPort, 'openbook_owner', 'openbook')
    const release = first.root
    await cli(['migrate'], release)
    await cli(
      ['seed', '--orgs', '3', '--customers', '3000', '--appointments', '6000', '--seed', '5'],
      release,
    )
    await query(primary.url('openbook'), "UPDATE organizations SET plan = 'enterprise'")
    const owners = await query<{ org: string; email: string }>(
      primary.url('openbook'),
      `SELECT m.org_id AS org, u.email FROM memberships m JOIN users u ON u.id = m.user_id
       WHERE m.role = 'owner' ORDER BY m.org_id LIMIT 3`,
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
    instances = [0, 1].map(
      (index) =>
        new Instance(
          run as RunDir,
          `app${index + 1}`,
          appPorts[2 * index] ?? 0,
          appPorts[2 * index + 1] ?? 0,
          {
            release,
            databaseUrl: ownerUrl,
            readUrl: undefined,
            shutdownDelayMs: SHUTDOWN_DELAY_MS,
            preparedStatements: 'default',
          },
        ),
    )
    await Promise.all(instances.map((instance) => instance.start()))
    // What each request of the load must return: the pages as 1.0.0 serves them before the upgrade
    // (nothing writes during the test).
    const paths = ['/api/public/v1/customers?limit=20', '/api/public/v1/appointments?limit=20&offset=40']
    for (const { key } of keys) {
      for (const path of paths) {
        const page = (await (
          await fetch(`http://127.0.0.1:${instances[0]?.port}${path}`, {
            headers: { authorization: `Bearer ${key}` },
          })
        ).json()) as { data: { id: string }[]; pagination: { total: number } }
        expected.push({ path, key, ids: page.data.map((item) => item.id), total: page.pagination.total })
      }
    }
    socket = run.file('haproxy-admin.sock')
    lb = new HAProxy(run, lbPort, statsPort, instances, withAdminSocket(socket))
    await lb.start()
  })

  afterAll(async () => {
    first?.remove()
    second?.remove()
    await run?.close()
  })

  it('1.0.0 → 1.1.0 with the checks held, then → this release rolling: no request fails; 1.0.0 cannot come back', async () => {
    const backend = (instance: Instance) => `openbook_instances/${instance.name}`
    const steps: string[] = []
    /** When every instance ran 1.1.0 (ms into the load), and what stopped the second hop, if anything. */
    let onFirstRelease = Number.POSITIVE_INFINITY
    let secondHop: string | undefined
    let elapsed: () => number = () => 0
    const step = (what: string) => steps.push(`${(elapsed() / 1000).toFixed(1)} s ${what}`)
    const upStatus = async (instance: Instance) => (await lb.servers())[instance.name]?.status ?? ''
    const report: LoadReport = await runLoad({
      name: 'upgrade from 1.0.0',
      url: `http://127.0.0.1:${lb.port}`,
      expected,
      seconds: 60,
      rate: RATE,
      connections: CONNECTIONS,
      async during(since) {
        elapsed = since
        await sleep(3_000)
        // 1. The balancer keeps the 1.0.0 instances as they are: their /readyz is about to say 503.
        for (const instance of instances) {
          expect(await haproxyCommand(socket, `disable health ${backend(instance)}`)).toBe('')
        }
        step('checks of the 1.0.0 instances held')
        // 2. 1.1.0's migrate (schema 7 to 12): 1.0.0 goes on answering requests.
        await cli(['migrate'], (second as PreviousRelease).root)
        step('1.1.0 migrate done')
        await sleep(2_000)
        // 3. Each instance in turn: drained, replaced by 1.1.0, checked again once it is ready.
        for (const instance of instances) {
          await haproxyCommand(socket, `set server ${backend(instance)} state drain`)
          await until(
            `${instance.name} drained`,
            async () => (await lb.servers())[instance.name]?.current === 0,
            10_000,
          )
          await instance.replaceWith((second as PreviousRelease).root)
          await haproxyCommand(socket, `enable health ${backend(instance)}`)
          await haproxyCommand(socket, `set server ${backend(instance)} state ready`)
          await until(`${instance.name} up on 1.1.0`, async () => (await upStatus(instance)) === 'UP', 15_000)
          step(`${instance.name} on 1.1.0`)
        }
        onFirstRelease = elapsed()
        // 4. 1.1.0 to this release: the ordinary rolling upgrade (docs/operators/upgrading.md).
        try {
          await cli(['migrate'], ROOT)
          step('this release migrate done')
          for (const instance of instances) {
            await instance.replaceWith(ROOT)
            await until(
              `${instance.name} up on this release`,
              async () => (await upStatus(instance)) === 'UP',
              15_000,
            )
            step(`${instance.name} on this release`)
          }
        } catch (error) {
          secondHop = (error as Error).message.split('\n')[0] ?? 'failed'
          step(`to this release: ${secondHop}`)
        }
      },
    })
    say(
      `upgrade-from-1.0: ${n(report.requests)} requests at ${RATE}/s, ${n(report.failures.length)} failed, ` +
        `${report.wrong} wrong, p99 ${ms(report.p99)}, max ${ms(report.max)}; ${steps.join('; ')}`,
    )
    const firstHopFailures = report.failures.filter((failure) => failure.start <= onFirstRelease)
    say(
      `upgrade-from-1.0: on 1.1.0 at ${ms(onFirstRelease)}, ${n(firstHopFailures.length)} failed until then`,
    )
    for (const failure of report.failures.slice(0, 5))
      say(`  failed ${failure.start}-${failure.end} ms: ${failure.what}`)
    expect(report.wrong).toBe(0)
    expect(firstHopFailures).toEqual([])

    // Going back to 1.0.0 is refused, never discovered: it cannot start on the new schema, and its
    // migrate fails and changes nothing.
    const grants = () =>
      query(
        ownerUrl,
        `SELECT table_name || ' ' || privilege_type AS what FROM information_schema.role_table_grants
         WHERE grantee = 'openbook_reader' ORDER BY 1`,
      ).then((rows) => JSON.stringify(rows))
    const before = await grants()
    const oldMigrate = await openbook(
      ['migrate'],
      { DATABASE_URL: ownerUrl },
      undefined,
      (first as PreviousRelease).root,
    )
    expect(oldMigrate.code).toBe(1)
    // Its first statement that a newer schema refuses: the version function's new result type, or,
    // from schema 14 on, a table it re-grants that became a view.
    expect(oldMigrate.stderr).toMatch(/cannot change return type of existing function|is not a table/)
    expect(await grants()).toBe(before)
    const oldServer = new Instance(
      run as RunDir,
      'app-1.0.0',
      instances[0]?.port ?? 0,
      instances[0]?.opsPort ?? 0,
      {
        release: (first as PreviousRelease).root,
        databaseUrl: ownerUrl,
        readUrl: undefined,
        shutdownDelayMs: SHUTDOWN_DELAY_MS,
        preparedStatements: 'default',
      },
    )
    instances[0]?.signal('SIGTERM')
    await instances[0]?.process?.exited
    await expect(oldServer.start()).rejects.toThrow(/expected 7/)
    // The second hop is the ordinary rolling upgrade from 1.1.0 (also the main topology test's).
    expect(secondHop).toBeUndefined()
    expect(report.failures).toEqual([])
  })
})
