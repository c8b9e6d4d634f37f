import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { createKey, createOrg } from '../helpers/fixtures.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import { ndjson, organizationLines } from './fixtures.js'
import { openbook } from './run.js'

/**
 * The command line when the database goes away under a command (a failover, a pooler or a server
 * restarting): the real binary, through a proxy that ends its session at a chosen statement,
 * before the COMMIT (the server never sees it) or at it (the server commits; its answer is lost).
 */

const ADMIN_SHUTDOWN = { code: '57P01', message: 'terminating connection due to administrator command' }
/** PgBouncer's words when its server connection dies under a client's query. */
const POOLER_CRASH = { code: '08P01', message: 'server conn crashed?' }
const COMMIT = 'COMMIT\u0000'

describe.skipIf(!postgresAvailable())('the command line when its connection is lost', () => {
  let database: TestDatabase
  let proxy: TcpProxy
  const org = 'org_cut'
  const owner = `owner@${org}.test`

  const query = async <Row>(text: string, values: unknown[] = []) => {
    const client = new pg.Client({ connectionString: database.url })
    await client.connect()
    try {
      return (await client.query(text, values)).rows as Row[]
    } finally {
      await client.end()
    }
  }
  const keysOf = () =>
    query<{ id: string; revoked: boolean }>(
      'SELECT id, revoked_at IS NOT NULL AS revoked FROM api_keys WHERE org_id = $1 ORDER BY id',
      [org],
    )
  const cli = (args: string[], input?: string, env: Record<string, string> = {}) =>
    openbook(args, { DATABASE_URL: proxy.urlFor(database.url), ...env }, input)

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    const setup = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    await createOrg(setup, org)
    await setup.close()
    proxy = TcpProxy.forUrl(database.url)
    await proxy.start()
  })
  afterEach(async () => {
    await query('DELETE FROM api_keys WHERE org_id = $1', [org])
  })
  afterAll(async () => {
    await proxy?.stop()
    await database?.drop()
  })

  const create = ['keys', 'create', '--org', org, '--as', owner, '--env', 'test']

  it('keys create, cut before its COMMIT: exit 1, says that nothing was written, and nothing was', async () => {
    proxy.cutSession({ on: 'INSERT INTO api_keys', ...ADMIN_SHUTDOWN })
    const result = await cli(create)
    expect(result).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `openbook: the connection to the database was lost before the new key of ${org} was committed ` +
        '(57P01: terminating connection due to administrator command): nothing was written; run the command again\n',
    })
    expect(await keysOf()).toEqual([])
  })

  it('keys create, cut while it commits: exit 3, says how to find out, and the key is there to find', async () => {
    proxy.cutSession({ after: 'INSERT INTO api_keys', on: COMMIT, forward: true, ...POOLER_CRASH })
    const result = await cli(create)
    expect(result).toEqual({
      code: 3,
      stdout: '',
      stderr:
        `openbook: the connection to the database was lost while committing the new key of ${org} ` +
        '(08P01: server conn crashed?): it may or may not have been written; ' +
        `see \`openbook keys list --org ${org}\`: a key created just now, whose secret you did not get, cannot be used; ` +
        'revoke it and create another\n',
    })
    // The server ran the COMMIT: the list the message points to shows the key.
    const listed = await cli(['keys', 'list', '--org', org, '--json'])
    expect(listed.code).toBe(0)
    expect((JSON.parse(listed.stdout) as { id: string }[]).map((key) => key.id)).toEqual(
      (await keysOf()).map((key) => key.id),
    )
    expect(await keysOf()).toHaveLength(1)
  })

  it('keys revoke, cut while it commits: exit 3, and running it again says when the key was revoked', async () => {
    const setup = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    const { id } = await createKey(setup, { id: org, ownerEmail: owner })
    await setup.close()
    proxy.cutSession({ after: 'UPDATE api_keys', on: COMMIT, forward: true, ...POOLER_CRASH })
    const result = await cli(['keys', 'revoke', id])
    expect(result).toEqual({
      code: 3,
      stdout: '',
      stderr:
        `openbook: the connection to the database was lost while committing the revocation of ${id} ` +
        '(08P01: server conn crashed?): it may or may not have been written; ' +
        `run \`openbook keys revoke ${id}\` again: it revokes the key if it is not yet, and prints when it was\n`,
    })
    const [revokedAt] = await query<{ at: string }>(
      `SELECT to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at FROM api_keys WHERE id = $1`,
      [id],
    )
    const again = await cli(['keys', 'revoke', id])
    expect(again).toEqual({ code: 0, stdout: `revoked ${id} of ${org} at ${revokedAt?.at}\n`, stderr: '' })
  })

  describe('import', () => {
    const importedOrg = 'org_cut_import'
    const file = ndjson(organizationLines(importedOrg, 'owner@cut-import.test'))
    const customers = async () =>
      Number(
        (
          await query<{ n: string }>('SELECT count(*) AS n FROM customers WHERE org_id = $1', [importedOrg])
        )[0]?.n,
      )

    it('cut before its COMMIT: exit 1, nothing written', async () => {
      proxy.cutSession({ on: 'CREATE TEMP TABLE', ...ADMIN_SHUTDOWN })
      const result = await cli(['import', '-'], file)
      expect(result).toEqual({
        code: 1,
        stdout: '',
        stderr:
          'openbook: the connection to the database was lost before the import was committed ' +
          '(57P01: terminating connection due to administrator command): nothing was written; run the command again\n',
      })
      expect(await customers()).toBe(0)
    })

    it('cut while it commits: exit 3, says that the same import again is safe, and it is', async () => {
      proxy.cutSession({ after: 'CREATE TEMP TABLE', on: COMMIT, forward: true, ...POOLER_CRASH })
      const result = await cli(['import', '-'], file)
      expect(result).toEqual({
        code: 3,
        stdout: '',
        stderr:
          'openbook: the connection to the database was lost while committing the import ' +
          '(08P01: server conn crashed?): it may or may not have been written; ' +
          'importing the same input again is safe: it writes only what is missing\n',
      })
      expect(await customers()).toBe(3)
      const again = await cli(['import', '-'], file)
      expect(again.code).toBe(0)
      expect(await customers()).toBe(3)
    })
  })

  it('orgs list, its session ended mid-command, runs again and answers', async () => {
    proxy.cutSession({ on: 'AS "activeKeys"', ...ADMIN_SHUTDOWN })
    const result = await cli(['orgs', 'list', '--json'])
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
    expect((JSON.parse(result.stdout) as { id: string }[]).map((o) => o.id)).toContain(org)
  })

  it('orgs list gives up after twice REQUEST_DEADLINE_MS, in the server words, without a stack', async () => {
    proxy.cutSession({ on: 'AS "activeKeys"', times: 1_000, ...ADMIN_SHUTDOWN })
    const started = performance.now()
    const result = await cli(['orgs', 'list'], undefined, { REQUEST_DEADLINE_MS: '1000' })
    const took = performance.now() - started
    proxy.cutSession({ on: 'AS "activeKeys"', times: 0, ...ADMIN_SHUTDOWN })
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(
      /^openbook: the database did not answer this command: 57P01: terminating connection due to administrator command; gave up after [3-9] tries in [12]\.\d s\n$/,
    )
    expect(took).toBeLessThan(8_000)
  })
})
