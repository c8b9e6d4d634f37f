import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Openbook } from '../src/index.js'
import { startServer, type TestServer } from './helpers/server.js'

const BIN = new URL('../bin/openbook-sync.js', import.meta.url).pathname

let server: TestServer
let directory: string
let keyFile: string

beforeAll(async () => {
  server = await startServer()
  directory = mkdtempSync(join(tmpdir(), 'openbook-sync-'))
  keyFile = join(directory, 'key')
  writeFileSync(keyFile, `${server.key}\n`)
}, 180_000)

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

type Fault = 'ok' | '5xx' | 'reset' | 'slow' | 'cut'

/** A proxy in front of the server that answers each request by the next fault of `plan`, cycling. */
async function faultyProxy(target: string, plan: readonly Fault[], delayMs = 0) {
  let n = 0
  const faults: Fault[] = []
  const proxy: Server = createServer(async (request, response) => {
    const fault = plan[n++ % plan.length] ?? 'ok'
    faults.push(fault)
    if (fault === 'reset') return request.socket.destroy()
    if (fault === '5xx') {
      response.writeHead(502, { 'content-type': 'text/html' })
      return response.end('<html>502 Bad Gateway</html>')
    }
    if (fault === 'slow') await new Promise((resolve) => setTimeout(resolve, 3_000))
    else if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs))
    if (response.destroyed) return
    try {
      const upstream = await fetch(new URL(request.url ?? '/', target), {
        headers: { authorization: request.headers.authorization ?? '' },
      })
      const body = Buffer.from(await upstream.arrayBuffer())
      response.writeHead(upstream.status, {
        'content-type': upstream.headers.get('content-type') ?? 'application/json',
        'x-request-id': upstream.headers.get('x-request-id') ?? '',
        'content-length': String(body.length),
      })
      if (fault === 'cut') {
        response.write(body.subarray(0, Math.floor(body.length / 2)))
        return setTimeout(() => request.socket.destroy(), 10)
      }
      response.end(body)
    } catch {
      request.socket.destroy()
    }
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  const { port } = proxy.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    faults,
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections()
        proxy.close(() => resolve())
      }),
  }
}

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function sync(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): { child: ChildProcess; done: Promise<Run> } {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const done = new Promise<Run>((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })))
  return { child, done }
}

const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { id: string; deletedAt?: string })

async function activeIds(resource: 'customers' | 'appointments', window = {}): Promise<string[]> {
  const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
  const rows = resource === 'customers' ? openbook.customers.all() : openbook.appointments.all(window)
  const ids: string[] = []
  for await (const row of rows) ids.push(row.id)
  return ids
}

describe('openbook-sync', () => {
  it('copies every customer to NDJSON and prints a JSON summary', async () => {
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
    const expected = await activeIds('customers')
    expect(summary).toMatchObject({
      resource: 'customers',
      complete: true,
      pass: 1,
      rows: expected.length,
      tombstones: 0,
    })
    expect(lines(out).map((row) => row.id)).toEqual(expected)
    expect(run.stderr).toMatch(/customers: \d+\/\d+ rows/)
    expect(run.stderr + run.stdout).not.toContain(server.key)
  }, 60_000)

  it('copies appointments in a window to CSV, with --key-env', async () => {
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
      { OB_KEY: server.key },
    ).done
    expect(run.code).toBe(0)
    const text = readFileSync(out, 'utf8').split('\r\n').filter(Boolean)
    expect(text[0]).toMatch(/^id,start,end,orgId,/)
    const expected = await activeIds('appointments', window)
    expect(expected.length).toBeGreaterThan(0)
    expect(text.slice(1).map((line) => line.split(',')[0])).toEqual(expected)
  }, 60_000)

  it('completes through a proxy that injects 5xx, resets, cut bodies and slow answers', async () => {
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
      expect(lines(out).map((row) => row.id)).toEqual(await activeIds('customers'))
    } finally {
      await proxy.close()
    }
  }, 120_000)

  it('resumes after kill -9 with no duplicate and no gap; tombstones only after a complete pass', async () => {
    const out = join(directory, 'resume.ndjson')
    const state = `${out}.state.json`
    const args = ['customers', '--key-file', keyFile, '--out', out, '--page-size', '10', '--json']
    // A first complete pass, the reference for deletions.
    expect((await sync([...args, '--base-url', server.baseUrl]).done).code).toBe(0)
    const firstPass = lines(out).length

    // Two customers go away; a slow pass is killed halfway: no tombstone yet.
    const gone = (
      await new Openbook({ apiKey: server.key, baseUrl: server.baseUrl }).customers.list({
        offset: 100,
        limit: 2,
      })
    ).data
    await server.importLines(
      gone.map((c) => ({
        type: 'customer',
        id: c.id,
        orgId: 'org_demo',
        isActive: false,
        createdAt: c.createdAt,
        updatedAt: c.updatedAt,
      })),
    )
    const slow = await faultyProxy(server.baseUrl, ['ok'], 60)
    try {
      const { child, done } = sync([...args, '--base-url', slow.url])
      let exited = false
      void done.then(() => {
        exited = true
      })
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, 50))
        if (exited) throw new Error(`the sync ended before it could be killed: ${(await done).stderr}`)
        const saved = existsSync(state) ? JSON.parse(readFileSync(state, 'utf8')) : undefined
        if ((saved?.current?.rows ?? 0) >= 60) break
      }
      child.kill('SIGKILL')
      expect((await done).code).toBe(null)
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
    expect(rows).toEqual(await activeIds('customers'))
    expect(
      second
        .filter((row) => row.deletedAt)
        .map((row) => row.id)
        .sort(),
    ).toEqual(gone.map((c) => c.id).sort())
  }, 120_000)

  it('exits 2 on usage and key errors, 1 when the server stays unreachable', async () => {
    const out = join(directory, 'x.ndjson')
    expect((await sync(['customers', '--base-url', server.baseUrl, '--out', out]).done).code).toBe(2)
    expect(
      (await sync(['orders', '--key-file', keyFile, '--base-url', server.baseUrl, '--out', out]).done).code,
    ).toBe(2)
    expect(
      (await sync(['customers', '--key-file', keyFile, '--base-url', server.baseUrl, '--out', 'x.txt']).done)
        .code,
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
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain('Invalid or expired API key')
    expect(refused.stderr).not.toContain('0'.repeat(64))
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo
        probe.close(() => resolve(port))
      })
    })
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
    ]).done
    expect(down.code).toBe(1)
    expect(down.stderr).toMatch(/ECONNREFUSED.*rerun to resume/)
    expect(down.stderr).not.toContain(server.key)
  }, 120_000)
})
