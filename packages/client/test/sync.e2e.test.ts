import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from './helpers/patience.js'
import { startServer, type TestServer } from './helpers/server.js'
import {
  activeIds,
  closedPort,
  deactivateCustomers,
  faultyProxy,
  killAfterRows,
  sync,
} from './helpers/sync.js'

let server: TestServer
let directory: string
let keyFile: string

beforeAll(async () => {
  server = await startServer()
  directory = mkdtempSync(join(tmpdir(), 'openbook-sync-'))
  keyFile = join(directory, 'key')
  writeFileSync(keyFile, `${server.key}\n`)
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { id: string; deletedAt?: string })

describe('openbook-sync', () => {
  it(
    'copies every customer to NDJSON and prints a JSON summary',
    async () => {
      const out = join(directory, 'customers.ndjson')
      const run = await sync([
        'customers',
        '--key-file',
        keyFile,
        '--base-url',
        server.baseUrl,
        '--out',
        out,
        '--json',
      ]).done
      expect(run.code).toBe(0)
      const summary = JSON.parse(run.stdout)
      const expected = await activeIds(server, 'customers')
      expect(summary).toMatchObject({
        resource: 'customers',
        complete: true,
        pass: 1,
        rows: expected.length,
        tombstones: 0,
      })
      expect(lines(out).map((row) => row.id)).toEqual(expected)
      expect(run.stderr).toMatch(/customers: \d+\/\d+ rows/)
      // The key file is readable by others (writeFileSync's 0644): said, once, without the key.
      expect(run.stderr).toContain(`${keyFile} can be read by other users (mode 0644): chmod 600 it`)
      chmodSync(keyFile, 0o600)
      const quiet = await sync([
        'customers',
        '--key-file',
        keyFile,
        '--base-url',
        server.baseUrl,
        '--out',
        out,
      ]).done
      expect(quiet.code, quiet.stderr).toBe(0)
      expect(quiet.stderr).not.toContain('can be read by other users')
      chmodSync(keyFile, 0o644)
      expect(run.stderr + run.stdout).not.toContain(server.key)
    },
    patience(60_000),
  )

  it(
    'copies appointments in a window to CSV, with --key-env',
    async () => {
      const out = join(directory, 'appointments.csv')
      const window = { startDate: '2025-01-01T00:00:00Z', endDate: '2026-06-30T23:59:59Z' }
      const run = await sync(
        [
          'appointments',
          '--key-env',
          'OB_KEY',
          '--base-url',
          server.baseUrl,
          '--out',
          out,
          '--since',
          window.startDate,
          '--until',
          window.endDate,
          '--json',
        ],
        { env: { OB_KEY: server.key } },
      ).done
      expect(run.code).toBe(0)
      const text = readFileSync(out, 'utf8').split('\r\n').filter(Boolean)
      expect(text[0]).toMatch(/^id,start,end,orgId,/)
      const expected = await activeIds(server, 'appointments', window)
      expect(expected.length).toBeGreaterThan(0)
      expect(text.slice(1).map((line) => line.split(',')[0])).toEqual(expected)
    },
    patience(60_000),
  )

  it(
    'completes through a proxy that injects 5xx, resets, cut bodies and slow answers',
    async () => {
      const proxy = await faultyProxy(server.baseUrl, [
        'ok',
        '5xx',
        'ok',
        'reset',
        'slow',
        'ok',
        'cut',
        'ok',
        'ok',
      ])
      try {
        const out = join(directory, 'faults.ndjson')
        const run = await sync([
          'customers',
          '--key-file',
          keyFile,
          '--base-url',
          proxy.url,
          '--out',
          out,
          '--page-size',
          '40',
          '--timeout-ms',
          '1000',
          '--json',
        ]).done
        expect(run.code, run.stderr).toBe(0)
        const summary = JSON.parse(run.stdout)
        expect(summary.retries).toBeGreaterThanOrEqual(4)
        expect(new Set(proxy.faults)).toEqual(new Set(['ok', '5xx', 'reset', 'slow', 'cut']))
        expect(lines(out).map((row) => row.id)).toEqual(await activeIds(server, 'customers'))
        // A request timed out on the slow answer is still held by the proxy while its retry comes.
        expect(proxy.maxInFlight()).toBeLessThanOrEqual(2)
      } finally {
        await proxy.close()
      }
    },
    patience(120_000),
  )

  it(
    'saves its state every N pages or seconds, not after every page',
    async () => {
      const out = join(directory, 'checkpoints.ndjson')
      const args = ['customers', '--key-file', keyFile, '--base-url', server.baseUrl, '--page-size', '10']
      const defaults = await sync([...args, '--out', out, '--json']).done
      expect(defaults.code, defaults.stderr).toBe(0)
      const first = JSON.parse(defaults.stdout)
      expect(first.requests).toBeGreaterThan(12)
      // 100 pages or 5 s by default: far fewer saves than pages, whatever the machine's speed.
      expect(first.checkpoints).toBeLessThanOrEqual(Math.ceil(first.durationMs / 5_000) + 1)
      expect(first.checkpoints).toBeLessThan(first.requests / 4)
      const every4 = await sync([
        ...args,
        '--out',
        join(directory, 'checkpoints-4.ndjson'),
        '--checkpoint-pages',
        '4',
        '--checkpoint-every',
        '1h',
        '--json',
      ]).done
      expect(every4.code, every4.stderr).toBe(0)
      const second = JSON.parse(every4.stdout)
      expect(second.checkpoints).toBe(Math.floor(second.requests / 4) + 1)
      const zero = await sync([...args, '--out', join(directory, 'x.ndjson'), '--checkpoint-pages', '0']).done
      expect(zero.code).toBe(2)
    },
    patience(60_000),
  )

  it(
    'resumes after kill -9 with no duplicate and no gap; tombstones only after a complete pass',
    async () => {
      const out = join(directory, 'resume.ndjson')
      const state = `${out}.state.json`
      // A checkpoint every 3 pages: the kill lands after some pages that no state names yet.
      const args = [
        'customers',
        '--key-file',
        keyFile,
        '--out',
        out,
        '--page-size',
        '10',
        '--checkpoint-pages',
        '3',
        '--json',
      ]
      // A first complete pass, the reference for deletions.
      expect((await sync([...args, '--base-url', server.baseUrl]).done).code).toBe(0)
      const firstPass = lines(out).length

      // Two customers go away; a slow pass is killed halfway: no tombstone yet.
      const gone = await deactivateCustomers(server, 100, 2)
      const slow = await faultyProxy(server.baseUrl, ['ok'], 60)
      try {
        await killAfterRows(sync([...args, '--base-url', slow.url]), state, 60)
        // One request at a time (the contract allows two per key).
        expect(slow.maxInFlight()).toBe(1)
      } finally {
        await slow.close()
      }
      expect(
        lines(out)
          .slice(firstPass)
          .some((row) => row.deletedAt),
      ).toBe(false)

      // The rerun goes on from the state: the second pass, whole, once; then the tombstones.
      const rerun = await sync([...args, '--base-url', server.baseUrl]).done
      expect(rerun.code, rerun.stderr).toBe(0)
      const summary = JSON.parse(rerun.stdout)
      expect(summary).toMatchObject({ pass: 2, resumed: true, complete: true, tombstones: 2 })
      const second = lines(out).slice(firstPass)
      const rows = second.filter((row) => !row.deletedAt).map((row) => row.id)
      expect(rows).toEqual(await activeIds(server, 'customers'))
      expect(
        second
          .filter((row) => row.deletedAt)
          .map((row) => row.id)
          .sort(),
      ).toEqual([...gone].sort())
    },
    patience(120_000),
  )

  it(
    'exits 2 on usage errors, 3 on key errors, 1 when the server stays unreachable',
    async () => {
      const out = join(directory, 'x.ndjson')
      expect((await sync(['customers', '--base-url', server.baseUrl, '--out', out]).done).code).toBe(2)
      expect(
        (await sync(['orders', '--key-file', keyFile, '--base-url', server.baseUrl, '--out', out]).done).code,
      ).toBe(2)
      expect(
        (
          await sync(['customers', '--key-file', keyFile, '--base-url', server.baseUrl, '--out', 'x.txt'])
            .done
        ).code,
      ).toBe(2)
      const badKey = join(directory, 'bad-key')
      writeFileSync(badKey, `svc_test_${'0'.repeat(64)}`)
      const refused = await sync([
        'customers',
        '--key-file',
        badKey,
        '--base-url',
        server.baseUrl,
        '--out',
        out,
      ]).done
      expect(refused.code).toBe(3)
      expect(refused.stderr).toContain('Invalid or expired API key')
      expect(refused.stderr).not.toContain('0'.repeat(64))
      const closed = await closedPort()
      const down = await sync([
        'customers',
        '--key-file',
        keyFile,
        '--base-url',
        `http://127.0.0.1:${closed}`,
        '--out',
        join(directory, 'down.ndjson'),
        '--timeout-ms',
        '200',
        '--max-elapsed',
        '1s',
      ]).done
      expect(down.code).toBe(1)
      expect(down.stderr).toMatch(/ECONNREFUSED.*rerun to resume/)
      expect(down.stderr).not.toContain(server.key)
    },
    patience(120_000),
  )
})
