import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import { patience } from './helpers/patience.js'
import { createDatabase, hasPostgres, type TestDatabase } from './helpers/postgres.js'
import { type Salon, setUpSalon } from './helpers/salons.js'
import { type ServerProcess, startPostgresServer } from './helpers/server.js'
import { switchableProxy, sync } from './helpers/sync.js'

/**
 * openbook-sync as a scheduler runs it: its default retries ride out a server restart of 30 s,
 * --max-elapsed and --max-attempts bound them, and the exit code tells a temporary failure (1,
 * retry later: the rerun resumes) from a command to fix (2) and a key to fix (3). A real server on
 * PostgreSQL, restarted for real (stopped, then started again on the same database).
 */

const SALON: Salon = { org: 'org_restart', customers: 600, appointments: 20, key: '' }

let database: TestDatabase
let server: ServerProcess
let keyId: string
let directory: string

beforeAll(async () => {
  if (!hasPostgres) return
  database = await createDatabase('openbook_restart')
  server = await startPostgresServer(database.url)
  keyId = await setUpSalon(server, SALON)
  directory = mkdtempSync(join(tmpdir(), 'openbook-sync-retry-'))
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
  await database?.drop()
})

const run = (args: readonly string[]) =>
  sync([...args, '--key-env', 'SALON_KEY'], { cwd: directory, env: { SALON_KEY: SALON.key } })

async function activeIds(): Promise<string[]> {
  const api = new Openbook({ apiKey: SALON.key, baseUrl: server.baseUrl })
  const ids: string[] = []
  for await (const customer of api.customers.all()) ids.push(customer.id)
  return ids
}

const ids = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { id: string }).id)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.skipIf(!hasPostgres)('openbook-sync retries and exit codes', () => {
  it(
    'rides out a 30 s server restart mid-pass with its defaults',
    async () => {
      let restart: Promise<void> | undefined
      let downFor = 0
      const proxy = await switchableProxy(server.baseUrl, (n) => {
        if (n !== 12 || restart) return
        // The twelfth request finds the server gone; it is back 30 s later, on the same database.
        proxy.setTarget(null)
        restart = (async () => {
          const stopped = Date.now()
          await server.stop()
          await sleep(30_000)
          server = await startPostgresServer(database.url)
          downFor = Date.now() - stopped
          proxy.setTarget(server.baseUrl)
        })()
      })
      try {
        const out = join(directory, 'restart.ndjson')
        const result = await run([
          'customers',
          '--base-url',
          proxy.url,
          '--out',
          out,
          '--page-size',
          '20',
          '--json',
        ]).done
        await restart
        expect(result.code, result.stderr).toBe(0)
        expect(downFor).toBeGreaterThanOrEqual(30_000)
        const summary = JSON.parse(result.stdout)
        expect(summary).toMatchObject({ complete: true, rows: SALON.customers })
        expect(summary.retries).toBeGreaterThanOrEqual(1)
        expect(ids(out)).toEqual(await activeIds())
      } finally {
        await proxy.close()
      }
    },
    patience(300_000),
  )

  it(
    'gives up after --max-elapsed or --max-attempts with exit 1, and the rerun resumes',
    async () => {
      const proxy = await switchableProxy(server.baseUrl, (n) => {
        if (n === 8) proxy.setTarget(null)
      })
      try {
        const out = join(directory, 'bounded.ndjson')
        const args = ['customers', '--out', out, '--page-size', '20', '--json']
        const started = Date.now()
        const elapsed = await run([...args, '--base-url', proxy.url, '--max-elapsed', '2s']).done
        expect(elapsed.code).toBe(1)
        // The request was retried for 2 s, plus at most one backoff and one attempt: far below the default 5 min.
        expect(Date.now() - started).toBeLessThan(120_000)
        expect(elapsed.stderr.trim().split('\n').at(-1)).toMatch(
          /\(after \d+ attempts in [0-9]s\); rerun to resume$/,
        )

        const attempts = await run([...args, '--base-url', proxy.url, '--max-attempts', '3']).done
        expect(attempts.code).toBe(1)
        expect(attempts.stderr).toMatch(/\(after 3 attempts in \d+s\); rerun to resume/)

        proxy.setTarget(server.baseUrl)
        const rerun = await run([...args, '--base-url', proxy.url]).done
        expect(rerun.code, rerun.stderr).toBe(0)
        expect(JSON.parse(rerun.stdout)).toMatchObject({ pass: 1, resumed: true, complete: true })
        expect(ids(out)).toEqual(await activeIds())
      } finally {
        await proxy.close()
      }
    },
    patience(300_000),
  )

  it(
    'exits 2 for a command to fix and 3 for a key to fix, at once',
    async () => {
      const out = join(directory, 'codes.ndjson')
      const base = ['customers', '--out', out]
      for (const bad of [
        ['--base-url', server.baseUrl, '--max-elapsed', '5 minutes'],
        ['--base-url', server.baseUrl, '--max-attempts', '0'],
        ['--base-url', server.baseUrl, '--page-size', 'many'],
        ['--base-url', `${server.baseUrl}/not-the-api/`],
      ]) {
        const result = await run([...base, ...bad]).done
        expect(result.code, `${bad.join(' ')}: ${result.stderr}`).toBe(2)
      }
      await server.cli(['keys', 'revoke', keyId])
      const revoked = await run([...base, '--base-url', server.baseUrl]).done
      expect(revoked.code).toBe(3)
      expect(revoked.stderr).toContain('Invalid or expired API key')
      expect(revoked.stderr).not.toContain(SALON.key)
    },
    patience(120_000),
  )
})
