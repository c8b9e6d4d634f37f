import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { cleanEnv, freePort, ROOT, type RunningProcess, spawnCollecting, start } from '../helpers/process.js'
import {
  createTestDatabase,
  describeEachStoreKind,
  migratedDataDir,
  type TestDatabase,
} from '../helpers/stores.js'
import { json, openbook } from './run.js'

/**
 * `import -` whose producer stays open (`(cat f; sleep 100) | openbook import -`) must not hold the
 * store without end; a command that waits for the store meanwhile says what it waits for.
 */

/** The `openbook` binary with its standard input left open for the test to write, or not. */
function openbookOpen(args: readonly string[], env: Record<string, string>) {
  const {
    child,
    stdout: out,
    stderr: err,
    closed: exited,
  } = spawnCollecting('node', ['bin/openbook.js', ...args], {
    cwd: ROOT,
    env: cleanEnv(env),
  })
  return {
    child,
    exited,
    output: () => ({ stdout: out(), stderr: err() }),
    async waitForStderr(pattern: RegExp): Promise<void> {
      while (!pattern.test(err())) {
        if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${err()}`)
        await sleep(50)
      }
    },
  }
}

const line = (record: Record<string, unknown>) => `${JSON.stringify(record)}\n`
const organization = (id: string) => line({ type: 'organization', id, name: id, plan: 'enterprise' })
/** A key of the right shape that no store knows: 401 means the store answered, 503 that it is held. */
const UNKNOWN_KEY = `svc_test_${'ab'.repeat(32)}`

describeEachStoreKind(
  (kind) =>
    `import - whose producer stays open, on ${kind === 'postgres' ? 'postgres' : 'embedded beside a running server'}`,
  (kind) => {
    let env: Record<string, string>
    let database: TestDatabase | undefined
    let server: RunningProcess | undefined
    let base = ''

    beforeAll(async () => {
      if (kind === 'postgres') {
        database = await createTestDatabase({ migrated: true })
        env = { DATABASE_URL: database.url }
        return
      }
      const { dir, remove } = migratedDataDir()
      removals.push(remove)
      env = { DATA_DIR: dir }
      const port = await freePort()
      base = `http://127.0.0.1:${port}`
      server = start('node', ['dist/server.js'], cleanEnv({ ...env, PORT: String(port), LOG_LEVEL: 'warn' }))
      await server.waitFor(/Try:/)
      while (
        !(await fetch(`${base}/openapi.json`).then(
          (r) => r.ok,
          () => false,
        ))
      )
        await sleep(100)
    }, patience(60_000))

    const removals: (() => void)[] = []
    afterAll(async () => {
      if (server) {
        server.child.kill('SIGTERM')
        expect(await server.exited()).toBe(0)
      }
      await database?.drop()
      for (const remove of removals) remove()
    })

    it(
      'no byte for --idle-timeout seconds: rolled back and said in one line, exit 1, while the producer is still open',
      async () => {
        const importing = openbookOpen(['import', '-', '--idle-timeout', '2'], env)
        importing.child.stdin.write(organization('org_idle'))
        // The test never closes the input: the import must end by itself.
        expect(await importing.exited).toBe(1)
        expect(importing.output()).toEqual({
          stdout: '',
          stderr:
            'openbook: no input for 2 s, and the input is still open: the import was rolled back and nothing of it was written ' +
            '(close the input when it is complete, or raise --idle-timeout)\n',
        })
        importing.child.stdin.destroy()
        const orgs = json<{ id: string }[]>(await openbook(['orgs', 'list', '--json'], env)).map((o) => o.id)
        expect(orgs).not.toContain('org_idle')
        if (server) {
          const response = await fetch(`${base}/api/public/v1/customers`, {
            headers: { authorization: `Bearer ${UNKNOWN_KEY}` },
          })
          expect(response.status).toBe(401)
        }
      },
      patience(60_000),
    )

    it(
      'input that keeps coming, slower than the limit between bytes, is imported',
      async () => {
        // 4 s in all, longer than the limit: each byte that comes starts the wait again.
        const importing = openbookOpen(['import', '-', '--idle-timeout', '3', '--json'], env)
        for (const id of ['org_slow_1', 'org_slow_2', 'org_slow_3', 'org_slow_4']) {
          importing.child.stdin.write(organization(id))
          await sleep(1_000)
        }
        importing.child.stdin.end()
        expect(await importing.exited, importing.output().stderr).toBe(0)
        expect(JSON.parse(importing.output().stdout)).toMatchObject({ counts: { organization: 4 } })
      },
      patience(60_000),
    )

    it.skipIf(kind === 'postgres')(
      'a command that waits for the store held by an import says once what it waits for, then runs',
      async () => {
        const importing = openbookOpen(['import', '-'], env)
        importing.child.stdin.write(organization('org_waited'))
        // Held: the API answers 503 while the import's transaction runs (after its first second).
        for (;;) {
          const response = await fetch(`${base}/api/public/v1/customers`, {
            headers: { authorization: `Bearer ${UNKNOWN_KEY}` },
          })
          if (response.status === 503) break
          await sleep(100)
        }
        const waiting = openbookOpen(['orgs', 'list', '--json'], env)
        await waiting.waitForStderr(/\n/)
        importing.child.stdin.end()
        expect(await importing.exited, importing.output().stderr).toBe(0)
        expect(await waiting.exited).toBe(0)
        expect(waiting.output().stderr).toBe(
          `waiting: DATA_DIR is busy with openbook import (pid ${importing.child.pid})\n`,
        )
        expect((JSON.parse(waiting.output().stdout) as { id: string }[]).map((o) => o.id)).toContain(
          'org_waited',
        )
      },
      60_000,
    )
  },
)

describe('import --idle-timeout', () => {
  it('is a whole number of seconds', async () => {
    const result = await openbook(['import', '-', '--idle-timeout', 'soon'], {})
    expect(result.code).toBe(2)
  })
})
