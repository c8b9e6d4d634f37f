import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Openbook } from '../../src/index.js'
import type { TestServer } from './server.js'

/** What the sync end-to-end tests and the README tests share. */

const BIN = fileURLToPath(new URL('../../bin/openbook-sync.js', import.meta.url))

export interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `openbook-sync` (the package's bin, on its build) with these arguments. */
export function sync(
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): { child: ChildProcess; done: Promise<Run> } {
  const child = spawn(process.execPath, [BIN, ...args], {
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: { ...process.env, ...options.env },
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

/**
 * Kills a running sync with SIGKILL once its state file says `rows` rows are saved; fails if it
 * ends on its own first.
 */
export async function killAfterRows(
  { child, done }: { child: ChildProcess; done: Promise<Run> },
  statePath: string,
  rows: number,
): Promise<void> {
  let exited = false
  void done.then(() => {
    exited = true
  })
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    if (exited) throw new Error(`the sync ended before it could be killed: ${(await done).stderr}`)
    const saved = existsSync(statePath) ? JSON.parse(readFileSync(statePath, 'utf8')) : undefined
    if ((saved?.current?.rows ?? 0) >= rows) break
  }
  child.kill('SIGKILL')
  if ((await done).code !== null) throw new Error('the sync was not killed')
}

/** The ids of the active rows, in the list's order, read with the client. */
export async function activeIds(
  server: TestServer,
  resource: 'customers' | 'appointments',
  window = {},
): Promise<string[]> {
  const openbook = new Openbook({ apiKey: server.key, baseUrl: server.baseUrl })
  const rows = resource === 'customers' ? openbook.customers.all() : openbook.appointments.all(window)
  const ids: string[] = []
  for await (const row of rows) ids.push(row.id)
  return ids
}

/** Deactivates `count` of the demo's customers from `offset` through `openbook import`; returns their ids. */
export async function deactivateCustomers(
  server: TestServer,
  offset: number,
  count: number,
): Promise<string[]> {
  const gone = (
    await new Openbook({ apiKey: server.key, baseUrl: server.baseUrl }).customers.list({
      offset,
      limit: count,
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
  return gone.map((c) => c.id)
}

/** A local port that nothing listens on. */
export function closedPort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo
      probe.close(() => resolve(port))
    })
  })
}

/** The request headers the test proxies pass on: the key, and a conditional request's tags. */
function forwarded(request: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = { authorization: request.headers.authorization ?? '' }
  const tags = request.headers['if-none-match']
  if (tags !== undefined) headers['if-none-match'] = tags
  return headers
}

/** The response headers the test proxies pass back (the body is sent decoded). */
function answered(upstream: Response, body: Buffer): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': upstream.headers.get('content-type') ?? 'application/json',
    'x-request-id': upstream.headers.get('x-request-id') ?? '',
    'content-length': String(body.length),
  }
  for (const name of ['etag', 'openbook-key-expires', 'openbook-organization']) {
    const value = upstream.headers.get(name)
    if (value !== null) headers[name] = value
  }
  return headers
}

export type Fault = 'ok' | '5xx' | 'reset' | 'slow' | 'cut'

/**
 * A proxy in front of the server that answers each request by the next fault of `plan`,
 * cycling; every answer waits `delayMs` first (a slow pass, to be killed halfway). It counts the
 * requests it holds at once.
 */
export async function faultyProxy(target: string, plan: readonly Fault[], delayMs = 0) {
  let n = 0
  const faults: Fault[] = []
  const flight = { now: 0, max: 0 }
  const proxy: Server = createServer(async (request, response) => {
    flight.max = Math.max(flight.max, ++flight.now)
    response.once('close', () => flight.now--)
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
      const upstream = await fetch(new URL(request.url ?? '/', target), { headers: forwarded(request) })
      const body = Buffer.from(await upstream.arrayBuffer())
      response.writeHead(upstream.status, answered(upstream, body))
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
    /** The most requests the proxy held at once. */
    maxInFlight: () => flight.max,
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections()
        proxy.close(() => resolve())
      }),
  }
}

/**
 * A temporary integrator's project with the client installed (linked, as npm links a workspace),
 * so that `import '@openbook/client'` and `npx openbook-sync` work in it. Returns its directory.
 */
export function integratorProject(prefix: string): string {
  const directory = mkdtempSync(join(tmpdir(), prefix))
  writeFileSync(join(directory, 'package.json'), '{ "name": "my-integration", "private": true }\n')
  mkdirSync(join(directory, 'node_modules/@openbook'), { recursive: true })
  mkdirSync(join(directory, 'node_modules/.bin'))
  symlinkSync(
    fileURLToPath(new URL('../../', import.meta.url)),
    join(directory, 'node_modules/@openbook/client'),
  )
  symlinkSync('../@openbook/client/bin/openbook-sync.js', join(directory, 'node_modules/.bin/openbook-sync'))
  return directory
}

/** The bodies of a Markdown text's fenced code blocks in `language`, in order. */
export function codeBlocks(markdown: string, language: string): string[] {
  return [...markdown.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))].map(
    (match) => match[1] ?? '',
  )
}

/**
 * A proxy in front of a server that can go away and come back (a restart, on another port): while
 * it has no target, or the target does not answer, each connection is reset. `onRequest` is told
 * the number of each request as it arrives (1 for the first) and its path and query, and the
 * request waits for it.
 */
export async function switchableProxy(
  target: string | null,
  onRequest: (n: number, url: string) => void | Promise<void> = () => {},
) {
  let current = target
  let n = 0
  const proxy: Server = createServer(async (request, response) => {
    // The request waits for onRequest (a change to make between two pages, at a known point).
    await onRequest(++n, request.url ?? '/')
    const upstreamUrl = current
    if (upstreamUrl === null) return request.socket.destroy()
    try {
      const upstream = await fetch(new URL(request.url ?? '/', upstreamUrl), { headers: forwarded(request) })
      const body = Buffer.from(await upstream.arrayBuffer())
      response.writeHead(upstream.status, answered(upstream, body))
      response.end(body)
    } catch {
      request.socket.destroy()
    }
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  const { port } = proxy.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => n,
    setTarget(url: string | null) {
      current = url
    },
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections()
        proxy.close(() => resolve())
      }),
  }
}

/**
 * A proxy in front of a server that rewrites each JSON body it passes back with `rewrite` (the
 * API as a later release within v1 might answer, with a field added): the status and the headers
 * the client reads stay the server's, `content-length` is the new body's. With `forgetTags`, it
 * drops `If-None-Match`: every conditional request is answered 200, as when the list changes
 * between any two of a client's requests.
 */
export async function rewritingProxy(
  target: string,
  rewrite: (body: unknown, path: string) => unknown,
  options: { forgetTags?: boolean } = {},
) {
  const proxy: Server = createServer(async (request, response) => {
    try {
      const headers = forwarded(request)
      if (options.forgetTags) delete headers['if-none-match']
      const upstream = await fetch(new URL(request.url ?? '/', target), { headers })
      const text = await upstream.text()
      const json = (upstream.headers.get('content-type') ?? '').startsWith('application/json') && text !== ''
      const body = Buffer.from(json ? JSON.stringify(rewrite(JSON.parse(text), request.url ?? '/')) : text)
      response.writeHead(upstream.status, answered(upstream, body))
      response.end(body)
    } catch {
      request.socket.destroy()
    }
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  const { port } = proxy.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections()
        proxy.close(() => resolve())
      }),
  }
}
