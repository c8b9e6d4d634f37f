import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadFactor, patience } from '../../packages/client/test/helpers/patience.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { bearer } from '../helpers/app.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { cleanEnv, freePort, type RunningProcess, start } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'

/** What a probe may take at p99, whatever the store does: within any balancer's or orchestrator's check time-out. */
const PROBE_P99_MS = 50
/**
 * The same bound on this machine as it is while the test runs: a machine busy with other work
 * (two other processes per core) stretches every answer, the probes' too. A probe that waits on
 * the store takes a second or more (the background check's round trips are capped at 1.5 s), and
 * one behind requests for a pool slot took 683 ms on an idle machine: both stay far above it, up
 * to its cap of 500 ms, half of Kubernetes' default probe time-out.
 */
const probeBound = () => Math.min(500, Math.round(PROBE_P99_MS * loadFactor()))
const WAITING_CLIENTS = 200
const PROBES = 100
/** As many requests at once as HAProxy's reference configuration sends one instance (maxconn 64). */
const BUSY_CLIENTS = 64

/** The 99th percentile of `values` (nearest rank). */
function p99(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? Number.NaN
}

interface Summary {
  readonly p99: number
  readonly max: number
  readonly answers: readonly string[]
}

function summarize(probes: readonly { ms: number; answer: string }[]): Summary {
  const times = probes.map((probe) => probe.ms)
  return {
    p99: p99(times),
    max: Math.max(...times),
    answers: [...new Set(probes.map((probe) => probe.answer))],
  }
}

/**
 * The server binary's /readyz and /healthz while its store is busy with as many requests as a
 * balancer sends it, and while it cannot answer: refusing connections (a pooler stopped) or
 * holding them without a word (a peer that hangs), with 200 clients waiting on the public port.
 * Probes answer from what the instance knows, never after a wait on the store or for a pool slot.
 */
describe.skipIf(!postgresAvailable())(
  'probes whatever the store does (the server binary, PostgreSQL behind a proxy)',
  () => {
    let database: TestDatabase
    let proxy: TcpProxy
    let server: RunningProcess | undefined
    let port = 0
    let opsPort = 0
    let key = ''

    beforeAll(async () => {
      database = await createTestDatabase({ migrated: true })
      const setup = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
      const org = await createOrg(setup, 'org_probes')
      ;({ key } = await createKey(setup, org))
      await setup.close()
      proxy = TcpProxy.forUrl(database.url)
      await proxy.start()
      port = await freePort()
      opsPort = await freePort()
      server = start(
        'node',
        ['dist/server.js'],
        cleanEnv({
          DATABASE_URL: proxy.urlFor(database.url),
          PORT: String(port),
          OPS_PORT: String(opsPort),
        }),
      )
      await server.waitFor(/operations listener \(healthz, readyz, metrics\) ready/)
    }, patience(120_000))

    afterAll(async () => {
      server?.child.kill('SIGTERM')
      await server?.exited()
      await proxy?.stop()
      await database?.drop()
    })

    /** One probe of `path`: its time in ms, and its status and body (numbers left out). */
    async function probeOnce(path: string): Promise<{ ms: number; answer: string }> {
      const t = performance.now()
      const response = await fetch(`http://127.0.0.1:${opsPort}${path}`)
      const body = await response.text()
      return { ms: performance.now() - t, answer: `${response.status} ${body.replace(/\d+(\.\d+)?/g, 'N')}` }
    }

    /**
     * `PROBES` of /readyz and of /healthz, one after the other and interleaved, so that both meet the
     * same machine. A round whose p99 is over the bound is measured again, up to three rounds: a
     * machine busy with other work slows a round now and then, a probe that waits on the store
     * slows every one. The best round counts; every round is logged.
     *
     * With `bound`, a round ends as soon as two probes of one path have taken longer: the 99th of
     * 100 is then over it whatever the others take, and a probe that waits on the store (a second
     * each) fails the test on its figures, not on the test's time limit.
     */
    async function probeRounds(ok: (ready: Summary, live: Summary) => boolean, bound?: number) {
      const rounds: { ready: Summary; live: Summary; stopped: string }[] = []
      const over = (probes: readonly { ms: number }[]) =>
        bound === undefined ? 0 : probes.filter((probe) => probe.ms > bound).length
      for (let round = 0; round < 3; round++) {
        const ready: { ms: number; answer: string }[] = []
        const live: { ms: number; answer: string }[] = []
        for (let i = 0; i < PROBES && over(ready) < 2 && over(live) < 2; i++) {
          ready.push(await probeOnce('/readyz'))
          live.push(await probeOnce('/healthz'))
        }
        const stopped =
          ready.length < PROBES ? ` (stopped after ${ready.length} of each: two over ${bound} ms)` : ''
        rounds.push({ ready: summarize(ready), live: summarize(live), stopped })
        const last = rounds.at(-1) as { ready: Summary; live: Summary; stopped: string }
        if (ok(last.ready, last.live)) break
      }
      const best =
        rounds.find((r) => ok(r.ready, r.live)) ??
        rounds.reduce((a, b) =>
          Math.max(b.ready.p99, b.live.p99) < Math.max(a.ready.p99, a.live.p99) ? b : a,
        )
      const text = rounds
        .map(
          (r) =>
            `/readyz p99 ${r.ready.p99.toFixed(1)} ms (max ${r.ready.max.toFixed(1)}), /healthz p99 ${r.live.p99.toFixed(1)} ms${r.stopped}`,
        )
        .join('; ')
      return { ...best, text }
    }

    it(
      `the store up and busy, ${BUSY_CLIENTS} clients without pause: ${PROBES} /readyz answer as fast as /healthz (within twice its p99, or ${PROBE_P99_MS} ms), never behind requests for a pool slot`,
      async () => {
        let stop = false
        let served = 0
        const clients = Array.from({ length: BUSY_CLIENTS }, async () => {
          while (!stop) {
            const response = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers?limit=1`, {
              headers: bearer(key),
            })
            await response.arrayBuffer()
            if (response.status === 200) served++
          }
        })
        await sleep(1_000)
        // Busy, the process itself answers more slowly (more so on a machine that runs other test
        // files at once): /readyz is held to /healthz's time, which never touches the store, or to
        // the bound, whichever is larger. Waiting for a pool slot took 683 ms here.
        const busyOk = (ready: Summary, live: Summary) => ready.p99 <= Math.max(probeBound(), 2 * live.p99)
        const { ready, live, text } = await probeRounds(busyOk)
        stop = true
        await Promise.all(clients)
        console.log(`[probes] ${BUSY_CLIENTS} busy clients (${served} x 200): ${text}`)
        expect(busyOk(ready, live), text).toBe(true)
        expect(ready.answers).toEqual(['200 {"status":"ready","store":"ok"}'])
      },
      patience(60_000),
    )

    it.each([
      ['refuses connections (the pooler stopped)', () => proxy.stop()],
      ['holds connections without answering (a peer that hangs)', async () => proxy.freeze()],
    ])(
      `the store %s, ${WAITING_CLIENTS} clients waiting: /readyz and /healthz answer ${PROBES} times each within ${PROBE_P99_MS} ms at p99`,
      async (_, fault) => {
        const ok = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers?limit=1`, {
          headers: bearer(key),
        })
        expect(ok.status).toBe(200)
        await fault()
        const clients = Array.from({ length: WAITING_CLIENTS }, () =>
          fetch(`http://127.0.0.1:${port}/api/public/v1/customers?limit=1`, { headers: bearer(key) }).then(
            async (response) => {
              await response.arrayBuffer()
              return response.status
            },
            () => 0,
          ),
        )
        let probed: Awaited<ReturnType<typeof probeRounds>>
        try {
          // The clients are in, waiting on the store; the background check (every second, its
          // round trips capped at 1.5 s) has met the fault too.
          await sleep(3_000)
          const bound = probeBound()
          probed = await probeRounds((r, l) => r.p99 <= bound && l.p99 <= bound, bound)
        } finally {
          // The store comes back, whatever the probes did: the waiting clients are answered.
          await proxy.stop()
          await proxy.start()
        }
        const { ready, live, text } = probed
        const statuses = await Promise.all(clients)
        console.log(
          `[probes] ${WAITING_CLIENTS} clients waiting: ${text}; readyz said ${ready.answers.join(' | ')}; ` +
            `clients: ${statuses.filter((s) => s === 200).length} x 200`,
        )
        expect(ready.p99, text).toBeLessThanOrEqual(probeBound())
        expect(live.p99, text).toBeLessThanOrEqual(probeBound())
        // Through an outage shorter than READY_OUTAGE_GRACE_MS: ready, and the body says what the store is doing.
        expect(ready.answers.every((answer) => answer.startsWith('200 '))).toBe(true)
        expect(ready.answers.some((answer) => answer.includes('"store":"unreachable"'))).toBe(true)
        expect(live.answers).toEqual(['200 {"status":"ok"}'])
      },
      patience(60_000),
    )
  },
)
