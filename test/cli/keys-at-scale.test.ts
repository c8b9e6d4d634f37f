import { spawn } from 'node:child_process'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cleanEnv, ROOT, spawnCollecting } from '../helpers/process.js'
import { createTestDatabase, postgresAvailable, type TestDatabase } from '../helpers/stores.js'
import { ndjson, organizationLines } from './fixtures.js'
import { json, openbook } from './run.js'

const ORGANIZATIONS = 10_000

/**
 * A reader that goes away is only noticed by a write after it left: an output shorter than the
 * socket's send buffer (208 KiB by default) and the reader's first read fits whole, and the command
 * ends 0. The outputs of these tests are kept at twice that.
 */
const LONGER_THAN_THE_PIPE = 2 * 272 * 1024
const HOUR = 3_600_000

/** A command's clock two hours behind the machine's (and the database's), as `faketime -f "-2h"` sets it. */
const CLOCK_BEHIND = {
  NODE_OPTIONS: `--import ${pathToFileURL(`${ROOT}/test/helpers/clock-offset.mjs`).href}`,
  OPENBOOK_TEST_CLOCK_OFFSET_MS: String(-2 * HOUR),
}

/** The database's clock (now()), in milliseconds. */
async function databaseNow(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ ms: number }>(
      'SELECT (extract(epoch FROM now()) * 1000)::float8 AS ms',
    )
    return Number(rows[0]?.ms)
  } finally {
    await client.end()
  }
}

/** Runs `openbook args` and closes its stdout after the first chunk, as `| head -1` does. */
function withReaderGone(args: readonly string[], env: Record<string, string>) {
  const child = spawn('node', ['bin/openbook.js', ...args], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  let first = ''
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  child.stdout.once('data', (chunk: Buffer) => {
    first = chunk.toString()
    child.stdout.destroy()
  })
  return new Promise<{ code: number | null; stderr: string; first: string }>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stderr, first }))
  })
}

/** The command line with thousands of organizations and keys: batches, and a reader that goes away. */
describe.skipIf(!postgresAvailable())('openbook keys and orgs at scale (PostgreSQL)', () => {
  let database: TestDatabase
  let env: Record<string, string>
  const cli = (...args: string[]) => openbook(args, env)

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    env = { DATABASE_URL: database.url }
    const many = Array.from({ length: ORGANIZATIONS }, (_, i) => ({
      type: 'organization',
      id: `org_${String(i).padStart(5, '0')}`,
      name: `Salon ${i}`,
      plan: 'starter',
    }))
    const imported = await openbook(
      ['import', '-'],
      env,
      ndjson([...organizationLines('org_chain', 'owner@chain.test'), ...many]),
    )
    expect(imported.code, imported.stderr).toBe(0)
  })
  afterAll(async () => {
    await database?.drop()
  })

  it('keys create --count N --json prints one JSON line a key, all written in one call', async () => {
    const created = await cli(
      'keys',
      'create',
      '--org',
      'org_chain',
      '--as',
      'owner@chain.test',
      '--env',
      'live',
      '--name',
      'rotation',
      '--expires-in',
      '90d',
      '--count',
      '300',
      '--json',
    )
    expect(created.code, created.stderr).toBe(0)
    const lines = created.stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(300)
    const keys = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    for (const key of keys) {
      expect(Object.keys(key).sort()).toEqual(
        ['createdAt', 'env', 'expiresAt', 'id', 'key', 'name', 'orgId', 'prefix'].sort(),
      )
      expect(key).toMatchObject({ env: 'live', name: 'rotation', orgId: 'org_chain', prefix: 'svc_live_' })
    }
    expect(new Set(keys.map((k) => k.key)).size).toBe(300)
    const listed = json<{ status: string }[]>(await cli('keys', 'list', '--org', 'org_chain', '--json'))
    expect(listed.filter((k) => k.status === 'active')).toHaveLength(300)
  })

  it('keys revoke --org revokes a batch in one call; a selection must be said', async () => {
    const refused = await cli('keys', 'revoke', '--org', 'org_chain')
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^openbook: say which keys of the organization to revoke: --all, --name/)
    const both = await cli('keys', 'revoke', 'key_x', '--org', 'org_chain', '--all')
    expect(both.code).toBe(1)
    expect((await cli('keys', 'revoke', '--all')).stderr).toMatch(/give --org/)

    const none = json<{ revoked: unknown[] }>(
      await cli('keys', 'revoke', '--org', 'org_chain', '--older-than', '1h', '--json'),
    )
    expect(none.revoked).toEqual([])
    const byName = json<{ orgId: string; revoked: { id: string; revokedAt: string }[] }>(
      await cli('keys', 'revoke', '--org', 'org_chain', '--name', 'rotation', '--json'),
    )
    expect(byName.orgId).toBe('org_chain')
    expect(byName.revoked).toHaveLength(300)
    const badBefore = await cli('keys', 'revoke', '--org', 'org_chain', '--created-before', 'yesterday')
    expect(badBefore.code).toBe(1)
    expect(badBefore.stderr).toBe('openbook: bad --created-before "yesterday": use an ISO-8601 date-time\n')
    const before = await cli(
      'keys',
      'revoke',
      '--org',
      'org_chain',
      '--created-before',
      '2000-01-01T00:00:00Z',
    )
    expect(before.stdout).toBe('revoked 0 active keys of org_chain\n')
    const later = await cli(
      'keys',
      'create',
      ...[
        '--org',
        'org_chain',
        '--as',
        'owner@chain.test',
        '--env',
        'test',
        '--name',
        'later',
        '--count',
        '3',
      ],
    )
    expect(later.code, later.stderr).toBe(0)
    const until = new Date((await databaseNow(database.url)) + 60_000).toISOString()
    const byInstant = json<{ revoked: unknown[] }>(
      await cli('keys', 'revoke', '--org', 'org_chain', '--created-before', until, '--json'),
    )
    expect(byInstant.revoked).toHaveLength(3)
    const text = await cli('keys', 'revoke', '--org', 'org_chain', '--all')
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toBe('revoked 0 active keys of org_chain\n')
    const listed = json<{ status: string }[]>(await cli('keys', 'list', '--org', 'org_chain', '--json'))
    expect(listed.every((k) => k.status === 'revoked')).toBe(true)
  })

  it("keys create --expires-in counts from the database's clock when the command line's is 2 h behind", async () => {
    const probe = spawnCollecting('node', ['-e', 'process.stdout.write(String(Date.now()))'], {
      cwd: ROOT,
      env: cleanEnv(CLOCK_BEHIND),
    })
    probe.child.stdin.end()
    await probe.closed
    const behind = (await databaseNow(database.url)) - Number(probe.stdout())
    expect(behind, 'the command line runs 2 h behind').toBeGreaterThan(2 * HOUR - 60_000)

    const skewed = (...args: string[]) => openbook(args, { ...env, ...CLOCK_BEHIND })
    const as = ['--org', 'org_chain', '--as', 'owner@chain.test', '--env', 'test', '--name', 'clock']
    const created = json<{ id: string; expiresAt: string }>(
      await skewed('keys', 'create', ...as, '--expires-in', '1h', '--json'),
    )
    const now = await databaseNow(database.url)
    expect(Date.parse(created.expiresAt)).toBeGreaterThan(now + HOUR - 60_000)
    expect(Date.parse(created.expiresAt)).toBeLessThanOrEqual(now + HOUR)
    const listed = json<{ id: string; status: string }[]>(
      await cli('keys', 'list', '--org', 'org_chain', '--json'),
    )
    expect(listed.find((k) => k.id === created.id)?.status).toBe('active')

    // An hour ahead by the command line's clock is an hour ago by the database's: refused, nothing written.
    const passed = new Date(now - HOUR).toISOString()
    const refused = await skewed('keys', 'create', ...as, '--expires-at', passed)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(
      /^openbook: the expiry must be in the future \(.* has passed by the database's clock/,
    )
    await cli('keys', 'revoke', created.id)
  })

  /** Runs `openbook args` whole, checks its output outgrows the pipe, then with the reader gone. */
  async function endsQuietlyWithTheReaderGone(args: readonly string[]) {
    const whole = await cli(...args)
    expect(whole.stdout.length, 'the output outgrows the pipe').toBeGreaterThan(LONGER_THAN_THE_PIPE)
    await expectQuietEnd(args)
  }
  async function expectQuietEnd(args: readonly string[]) {
    const result = await withReaderGone(args, env)
    expect(result.first.length).toBeGreaterThan(0)
    expect(result.stderr).toBe('')
    expect(result.code).toBe(141)
  }

  it.each([
    ['orgs list', ['orgs', 'list']],
    ['orgs list --json', ['orgs', 'list', '--json']],
  ])(
    '%s into a pipe closed after its first line ends quietly (exit 141, as SIGPIPE), no stack trace',
    async (_name, args) => {
      await endsQuietlyWithTheReaderGone(args)
    },
  )

  it('keys create --count, keys list and keys revoke --org --all into a pipe closed after the first line end quietly (exit 141), all written', async () => {
    const as = ['--org', 'org_chain', '--as', 'owner@chain.test', '--env', 'test']
    const listKeys = async () =>
      json<{ status: string }[]>(await cli('keys', 'list', '--org', 'org_chain', '--json'))
    const before = await listKeys()
    await expectQuietEnd(['keys', 'create', ...as, '--count', '8000', '--json'])
    const listed = await listKeys()
    expect(listed.length, 'the keys are created although nobody read them').toBe(before.length + 8_000)

    await endsQuietlyWithTheReaderGone(['keys', 'list', '--org', 'org_chain'])
    await endsQuietlyWithTheReaderGone(['keys', 'list', '--org', 'org_chain', '--json'])

    // Some 100 bytes of the revocation's document a key.
    expect(listed.filter((k) => k.status === 'active').length * 100).toBeGreaterThan(LONGER_THAN_THE_PIPE)
    await expectQuietEnd(['keys', 'revoke', '--org', 'org_chain', '--all', '--json'])
    expect(
      (await listKeys()).filter((k) => k.status === 'active'),
      'all revoked although nobody read it',
    ).toEqual([])
  })
})
