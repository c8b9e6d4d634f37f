import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { json, openbook } from '../cli/run.js'
import { cleanEnv, freePort, ROOT, start } from '../helpers/process.js'
import { migratedDataDir } from '../helpers/stores.js'

/**
 * The user's worst day with the embedded store: two processes on one DATA_DIR, Ctrl-C in the
 * middle of an import, a server killed under a command. Real binaries, real PGlite, real HTTP.
 */
const removals: (() => void)[] = []
/** A migrated DATA_DIR: none of these tests is of a first start (PGlite's initdb, seconds of CPU). */
function dataDir(): string {
  const { dir, remove } = migratedDataDir()
  removals.push(remove)
  return dir
}
afterAll(() => {
  for (const remove of removals) remove()
})

const customer = (org: string, i: number) =>
  `${JSON.stringify({
    type: 'customer',
    id: `cus_${i}`,
    orgId: org,
    firstName: `F${i}`,
    isActive: true,
    createdAt: new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString(),
    updatedAt: '2025-06-01T00:00:00Z',
  })}\n`
const organization = (id: string) =>
  `${JSON.stringify({ type: 'organization', id, name: id, plan: 'enterprise' })}\n`
const customers = (org: string, from: number, to: number) => {
  let text = ''
  for (let i = from; i < to; i++) text += customer(org, i)
  return text
}

interface Spawned {
  readonly child: ChildProcessWithoutNullStreams
  readonly done: Promise<{ code: number | null; stdout: string; stderr: string }>
}

/** The CLI with its standard input left open: the test writes it, ends it, or interrupts it. */
function openbookWithInput(args: readonly string[], env: Record<string, string>): Spawned {
  const child = spawn('node', ['bin/openbook.js', ...args], { cwd: ROOT, env: cleanEnv(env) })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  child.stdin.on('error', () => undefined)
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => resolve({ code, stdout, stderr })),
  )
  return { child, done }
}

async function until(condition: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out')
    await sleep(50)
  }
}

/**
 * Sockets bound to the server's operator socket in DATA_DIR (/proc/net/unix lists an accepted
 * connection under the listener's path): 1 while it listens, one more per client it took.
 */
function operatorConnections(dir: string): number {
  const path = resolve(dir, 'openbook.sock')
  return readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .filter((line) => line.endsWith(` ${path}`)).length
}

async function customerCount(env: Record<string, string>, org: string): Promise<number> {
  const listed = json<{ id: string; customers: number }[]>(await openbook(['orgs', 'list', '--json'], env))
  return listed.find((o) => o.id === org)?.customers ?? 0
}

async function serve(dir: string) {
  const port = await freePort()
  const server = start('node', ['dist/server.js'], cleanEnv({ DATA_DIR: dir, PORT: String(port) }))
  return { server, port }
}

describe('one process per DATA_DIR', () => {
  it(
    'a second direct command is refused in one line while an import holds the store; nothing is lost',
    async () => {
      const env = { DATA_DIR: dataDir() }
      const importing = openbookWithInput(['import', '-'], env)
      importing.child.stdin.write(organization('org_a') + customers('org_a', 0, 100))
      await until(() => existsSync(join(env.DATA_DIR, 'openbook.lock')))

      const second = await openbook(['orgs', 'create', '--name', 'B', '--plan', 'free', '--id', 'org_b'], env)
      expect(second.code).toBe(1)
      expect(second.stderr).toMatch(/^openbook: DATA_DIR .* is in use by `openbook import` \(pid \d+\)/)
      expect(second.stderr.trim().split('\n')).toHaveLength(1)

      const { server } = await serve(env.DATA_DIR)
      expect(await server.exited()).toBe(1)
      expect(server.output()).toMatch(/^openbook: DATA_DIR .* is in use by `openbook import` \(pid \d+\)/)

      importing.child.stdin.end(customers('org_a', 100, 200))
      const imported = await importing.done
      expect(imported.code, imported.stderr).toBe(0)
      // The store opens, and holds what was imported.
      expect(await customerCount(env, 'org_a')).toBe(200)
      expect(
        (await openbook(['orgs', 'create', '--name', 'B', '--plan', 'free', '--id', 'org_b'], env)).code,
      ).toBe(0)
    },
    patience(60_000),
  )

  it(
    'a lock left by a killed process is taken over',
    async () => {
      const env = { DATA_DIR: dataDir() }
      const importing = openbookWithInput(['import', '-'], env)
      importing.child.stdin.write(organization('org_a'))
      await until(() => existsSync(join(env.DATA_DIR, 'openbook.lock')))
      importing.child.kill('SIGKILL')
      await importing.done
      expect(existsSync(join(env.DATA_DIR, 'openbook.lock'))).toBe(true)

      const after = await openbook(['orgs', 'create', '--name', 'B', '--plan', 'free', '--id', 'org_b'], env)
      expect(after.code, after.stderr).toBe(0)
      const listed = json<{ id: string }[]>(await openbook(['orgs', 'list', '--json'], env))
      expect(listed.map((o) => o.id)).toContain('org_b')
    },
    patience(60_000),
  )
})

describe('commands forwarded to a running embedded server', () => {
  it(
    'an interrupted import commits nothing, reads get an answer meanwhile, and SIGTERM still exits 0',
    async () => {
      const dir = dataDir()
      const env = { DATA_DIR: dir }
      const { server, port } = await serve(dir)
      await server.waitFor(/Server listening/)
      const key = /svc_test_[0-9a-f]{64}/.exec(server.output())?.[0] as string
      try {
        const importing = openbookWithInput(['import', '-'], env)
        importing.child.stdin.write(organization('org_cut') + customers('org_cut', 0, 5_000))
        // Reads while the import starts and then holds the store (PGlite runs one transaction at a
        // time): each gets a status promptly, 503 with Retry-After once the import holds it. Five
        // reads at least, and on until one meets the import (a busy machine starts it later).
        const statuses: number[] = []
        const holdBy = Date.now() + patience(30_000)
        while (statuses.length < 5 || (!statuses.includes(503) && Date.now() < holdBy)) {
          const started = Date.now()
          const response = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers?limit=1`, {
            headers: { authorization: `Bearer ${key}` },
            signal: AbortSignal.timeout(5_000),
          })
          statuses.push(response.status)
          if (response.status === 503) {
            expect(response.headers.get('retry-after')).toMatch(/^\d+$/)
            expect(((await response.json()) as { code: string }).code).toBe('service_unavailable')
          } else await response.arrayBuffer()
          expect(Date.now() - started).toBeLessThan(patience(3_000))
          await sleep(100)
        }
        expect(statuses).toContain(503)
        expect(statuses.every((status) => status === 200 || status === 503)).toBe(true)
        // Every one of them is in the request log (pino writes it asynchronously).
        const logged = () =>
          server.output().match(/"route":"\/api\/public\/v1\/customers","status":503/g)?.length
        await until(() => logged() === statuses.filter((status) => status === 503).length)
        // Ctrl-C on the CLI, its input still open: the server must not take the close as end of input.
        importing.child.kill('SIGINT')
        await importing.done
        await until(async () => (await openbook(['orgs', 'list', '--json'], env)).code === 0)
        const listed = json<{ id: string }[]>(await openbook(['orgs', 'list', '--json'], env))
        expect(listed.map((o) => o.id)).not.toContain('org_cut')

        // A complete import through the same path commits.
        const whole = await openbook(
          ['import', '-'],
          env,
          organization('org_whole') + customers('org_whole', 0, 300),
        )
        expect(whole.code, whole.stderr).toBe(0)
        expect(await customerCount(env, 'org_whole')).toBe(300)
      } finally {
        server.child.kill('SIGTERM')
      }
      expect(await server.exited()).toBe(0)
    },
    patience(90_000),
  )

  it(
    'a seed cancelled by Ctrl-C stops in the server; SIGTERM then exits 0 at once',
    async () => {
      const dir = dataDir()
      const env = { DATA_DIR: dir }
      const { server } = await serve(dir)
      await server.waitFor(/Server listening/)
      const seeding = openbookWithInput(
        ['seed', '--orgs', '5', '--customers', '400000', '--appointments', '0'],
        env,
      )
      await sleep(3_000)
      seeding.child.kill('SIGINT')
      await seeding.done
      // The server is free again soon: its next command runs, and the seed left nothing behind.
      await until(async () => (await openbook(['orgs', 'list', '--json'], env)).code === 0, patience(15_000))
      const listed = json<{ id: string }[]>(await openbook(['orgs', 'list', '--json'], env))
      expect(listed.map((o) => o.id)).toEqual(['org_demo'])

      const reseeding = openbookWithInput(
        ['seed', '--orgs', '5', '--customers', '400000', '--appointments', '0'],
        env,
      )
      await sleep(3_000)
      const stopping = Date.now()
      server.child.kill('SIGTERM')
      expect(await server.exited()).toBe(0)
      expect(Date.now() - stopping).toBeLessThan(patience(8_000))
      const seeded = await reseeding.done
      expect(seeded.code).toBe(1)
      expect(seeded.stderr.trim().split('\n').at(-1)).toMatch(/^openbook: /)
    },
    patience(90_000),
  )

  it(
    'the CLI says so in one line when the server dies under its command',
    async () => {
      const dir = dataDir()
      const env = { DATA_DIR: dir }
      const { server } = await serve(dir)
      await server.waitFor(/Server listening/)
      const importing = openbookWithInput(['import', '-'], env)
      importing.child.stdin.write(organization('org_x'))
      // Killed once the server has taken the command (not after a fixed wait: a CLI that started
      // later than that would find the server gone and open DATA_DIR itself).
      await until(() => operatorConnections(dir) >= 2)
      server.child.kill('SIGKILL')
      const result = await importing.done
      expect(result.code).toBe(1)
      expect(result.stderr).toMatch(/^openbook: the embedded server stopped before the command finished/)
      expect(result.stderr.trim().split('\n')).toHaveLength(1)
    },
    patience(60_000),
  )
})
