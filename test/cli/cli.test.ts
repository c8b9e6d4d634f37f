import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestDatabase, postgresAvailable, STORE_KINDS, type TestDatabase } from '../helpers/stores.js'
import { type CliResult, json, openbook } from './run.js'

const SECRET = /^svc_(test|live)_[0-9a-f]{64}$/

function expectOneLineFailure(result: CliResult, code: number, pattern: RegExp): void {
  expect(result.code, result.stderr).toBe(code)
  expect(result.stdout).toBe('')
  expect(result.stderr.trim().split('\n')).toHaveLength(1)
  expect(result.stderr).toMatch(pattern)
}

describe.each(STORE_KINDS)('openbook command line on %s', (kind) => {
  describe.skipIf(kind === 'postgres' && !postgresAvailable())('', () => {
    let env: Record<string, string>
    let database: TestDatabase | undefined
    let dataDir: string | undefined
    const cli = (...args: string[]) => openbook(args, env)

    beforeAll(async () => {
      if (kind === 'postgres') {
        database = await createTestDatabase()
        env = { DATABASE_URL: database.url }
      } else {
        dataDir = mkdtempSync(join(tmpdir(), 'openbook-cli-'))
        env = { DATA_DIR: dataDir }
      }
    })

    afterAll(async () => {
      await database?.drop()
      if (dataDir) rmSync(dataDir, { recursive: true, force: true })
    })

    it('migrate applies the schema, then has nothing to do; --json prints one document', async () => {
      const first = await cli('migrate', '--json')
      expect(json<{ version: number }>(first).version).toBe(1)
      const again = await cli('migrate')
      expect(again.code).toBe(0)
      expect(again.stdout).toMatch(/already at version 1/)
    })

    it('orgs create and list, with an owner', async () => {
      const created = json<{ id: string; plan: string; owner: { email: string } }>(
        await cli('orgs', 'create', '--name', 'Studio Pro', '--plan', 'professional', '--id', 'org_pro', '--owner-email', 'owner@pro.test', '--json'),
      )
      expect(created).toMatchObject({ id: 'org_pro', plan: 'professional', owner: { email: 'owner@pro.test' } })
      json(await cli('orgs', 'create', '--name', 'Free', '--plan', 'free', '--id', 'org_free', '--owner-email', 'owner@free.test', '--json'))
      json(await cli('orgs', 'create', '--name', 'Starter', '--plan', 'starter', '--id', 'org_starter', '--owner-email', 'owner@starter.test', '--json'))
      json(await cli('orgs', 'create', '--name', 'Big', '--plan', 'enterprise', '--id', 'org_ent', '--owner-email', 'owner@ent.test', '--json'))
      const generated = json<{ id: string }>(await cli('orgs', 'create', '--name', 'No id', '--plan', 'free', '--json'))
      expect(generated.id).toMatch(/^org_[0-9a-f]{16}$/)
      const list = json<{ id: string; plan: string; members: number; activeKeys: number }[]>(await cli('orgs', 'list', '--json'))
      expect(list.find((o) => o.id === 'org_pro')).toMatchObject({ plan: 'professional', members: 1, activeKeys: 0 })
      expect((await cli('orgs', 'list')).stdout).toMatch(/org_pro\s+Studio Pro\s+professional/)
    })

    it('orgs create refuses a bad plan, a taken id (exit 1) and a missing name (exit 2)', async () => {
      expectOneLineFailure(await cli('orgs', 'create', '--name', 'X', '--plan', 'gold'), 1, /bad plan "gold"/)
      expectOneLineFailure(await cli('orgs', 'create', '--name', 'X', '--plan', 'free', '--id', 'org_pro'), 1, /exists already/)
      expect((await cli('orgs', 'create', '--plan', 'free')).code).toBe(2)
    })

    it('keys create: owner or admin only, and only on plans with API access', async () => {
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_free', '--as', 'owner@free.test', '--env', 'test'), 1, /free plan .* no API access/)
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_starter', '--as', 'owner@starter.test', '--env', 'test'), 1, /starter plan .* no API access/)
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@ent.test', '--env', 'test'), 1, /not a member/)
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_nope', '--as', 'owner@pro.test', '--env', 'test'), 1, /unknown organization/)
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@pro.test', '--env', 'prod'), 1, /bad env/)
    })

    it('keys create refuses a member, accepts an admin', async () => {
      const memberLines = [
        { type: 'user', id: 'usr_member_pro', email: 'member@pro.test' },
        { type: 'user', id: 'usr_admin_pro', email: 'admin@pro.test' },
        { type: 'membership', orgId: 'org_pro', userId: 'usr_member_pro', role: 'member' },
        { type: 'membership', orgId: 'org_pro', userId: 'usr_admin_pro', role: 'admin' },
      ]
      const imported = await openbook(['import', '-'], env, memberLines.map((line) => JSON.stringify(line)).join('\n'))
      expect(imported.code, imported.stderr).toBe(0)
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_pro', '--as', 'member@pro.test', '--env', 'test'), 1, /only an owner or admin/)
      const byAdmin = json<{ key: string }>(await cli('keys', 'create', '--org', 'org_pro', '--as', 'admin@pro.test', '--env', 'live', '--json'))
      expect(byAdmin.key).toMatch(/^svc_live_[0-9a-f]{64}$/)
    })

    it('keys create --json prints exactly the documented fields; professional allows 5 active keys', async () => {
      // One live key exists from the admin test; four more reach the limit.
      const created: { id: string; key: string }[] = []
      for (let i = 0; i < 4; i++) {
        const key = json<Record<string, unknown>>(await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@pro.test', '--env', 'test', '--name', `k${i}`, '--json'))
        expect(Object.keys(key).sort()).toEqual(['createdAt', 'env', 'expiresAt', 'id', 'key', 'name', 'orgId', 'prefix'])
        expect(key).toMatchObject({ env: 'test', orgId: 'org_pro', name: `k${i}`, prefix: 'svc_test_', expiresAt: null })
        expect(key.key).toMatch(SECRET)
        created.push(key as { id: string; key: string })
      }
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@pro.test', '--env', 'test'), 1, /allows 5 active API keys/)
      const revoked = await cli('keys', 'revoke', created[0]?.id ?? '')
      expect(revoked.code).toBe(0)
      expect(revoked.stdout).toMatch(/revoked key_/)
      expect((await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@pro.test', '--env', 'test')).code).toBe(0)
    })

    it('enterprise has no key limit', async () => {
      for (let i = 0; i < 6; i++) {
        expect((await cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'live')).code).toBe(0)
      }
    })

    it('expiry: --expires-in, --expires-at, bad durations; an expired key lists as expired', async () => {
      const inDays = json<{ expiresAt: string }>(await cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'test', '--expires-in', '90d', '--json'))
      const days = (Date.parse(inDays.expiresAt) - Date.now()) / 86_400_000
      expect(days).toBeGreaterThan(89.9)
      expect(days).toBeLessThan(90.1)
      const at = json<{ expiresAt: string }>(await cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'test', '--expires-at', '2099-01-02T03:04:05Z', '--json'))
      expect(at.expiresAt).toBe('2099-01-02T03:04:05.000Z')
      for (const bad of ['90', '1w', '-1d', 'soon']) {
        expectOneLineFailure(await cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'test', '--expires-in', bad), 1, /bad duration/)
      }
      expectOneLineFailure(await cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'test', '--expires-at', 'tomorrow'), 1, /bad --expires-at/)
      const short = json<{ id: string }>(await cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'test', '--expires-in', '1s', '--json'))
      await new Promise((resolve) => setTimeout(resolve, 1_200))
      const list = json<{ id: string; status: string }[]>(await cli('keys', 'list', '--org', 'org_ent', '--json'))
      expect(list.find((k) => k.id === short.id)?.status).toBe('expired')
    })

    it('keys list shows hints and statuses, never a secret', async () => {
      const created = json<{ id: string; key: string }>(await cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'live', '--json'))
      expect((await cli('keys', 'revoke', created.id)).code).toBe(0)
      for (const output of [(await cli('keys', 'list', '--org', 'org_ent', '--json')).stdout, (await cli('keys', 'list', '--org', 'org_ent')).stdout]) {
        expect(output).not.toContain(created.key)
        expect(output).not.toContain(created.key.slice(-64))
        expect(output).not.toMatch(/[0-9a-f]{64}/)
      }
      const list = json<{ id: string; hint: string; status: string; revokedAt: string | null; lastUsedAt: string | null }[]>(
        await cli('keys', 'list', '--org', 'org_ent', '--json'),
      )
      const row = list.find((k) => k.id === created.id)
      expect(row).toMatchObject({ hint: `svc_live_…${created.key.slice(-4)}`, status: 'revoked', lastUsedAt: null })
      expect(row?.revokedAt).toMatch(/^\d{4}-/)
      expect(list.some((k) => k.status === 'active')).toBe(true)
      expectOneLineFailure(await cli('keys', 'list', '--org', 'org_nope'), 1, /unknown organization/)
      expectOneLineFailure(await cli('keys', 'revoke', 'key_nope'), 1, /unknown API key/)
    })

    it('API_KEY_BRAND sets the key prefix', async () => {
      const key = json<{ key: string; prefix: string }>(
        await openbook(['keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'test', '--json'], { ...env, API_KEY_BRAND: 'acme' }),
      )
      expect(key.prefix).toBe('acme_test_')
      expect(key.key).toMatch(/^acme_test_[0-9a-f]{64}$/)
    })

    it('usage errors exit 2', async () => {
      expect((await cli()).code).toBe(2)
      expect((await cli('frobnicate')).code).toBe(2)
      expect((await cli('orgs', 'list', '--frob')).code).toBe(2)
      expect((await cli('keys', 'create', '--org', 'org_ent')).code).toBe(2)
      expect((await cli('seed', '--orgs', 'many', '--customers', '1', '--appointments', '1')).code).toBe(2)
      expect((await cli('--help')).code).toBe(0)
    })

    it('seed: exact counts, skewed sizes, the same data for the same seed', async () => {
      const args = ['seed', '--orgs', '14', '--customers', '3000', '--appointments', '6000', '--seed', '3', '--json']
      const first = json<{ counts: Record<string, number>; orgIds: string[] }>(await cli(...args))
      expect(first.counts).toMatchObject({ organization: 14, customer: 3000, appointment: 6000 })
      const orgs = json<{ id: string; customers: number; appointments: number }[]>(await cli('orgs', 'list', '--json'))
      const seeded = orgs.filter((o) => first.orgIds.includes(o.id))
      const sizes = seeded.map((o) => o.customers).sort((a, b) => b - a)
      expect(sizes[0]).toBeGreaterThan(10 * (sizes.at(-1) ?? 1))
      // Seeding again with the same seed upserts the very same rows: nothing changes.
      json(await cli(...args))
      const again = json<typeof orgs>(await cli('orgs', 'list', '--json')).filter((o) => first.orgIds.includes(o.id))
      expect(again).toEqual(seeded)
    })
  })
})

describe.skipIf(!postgresAvailable())('no table holds a created secret (PostgreSQL)', () => {
  it('stores only the SHA-256 and a hint', async () => {
    const database = await createTestDatabase()
    const env = { DATABASE_URL: database.url }
    try {
      json(await openbook(['migrate', '--json'], env))
      json(await openbook(['orgs', 'create', '--name', 'S', '--plan', 'enterprise', '--id', 'org_s', '--owner-email', 'o@s.test', '--json'], env))
      const created = json<{ id: string; key: string }>(await openbook(['keys', 'create', '--org', 'org_s', '--as', 'o@s.test', '--env', 'live', '--json'], env))
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        const tables = await client.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
        expect(tables.rows.length).toBeGreaterThanOrEqual(8)
        for (const { table_name } of tables.rows) {
          const dump = await client.query<{ row: string }>(`SELECT to_jsonb(t)::text AS row FROM ${table_name} t`)
          for (const { row } of dump.rows) {
            expect(row).not.toContain(created.key)
            expect(row).not.toContain(created.key.slice(-64))
          }
        }
        const stored = await client.query<{ key_hash: string }>('SELECT key_hash FROM api_keys WHERE id = $1', [created.id])
        expect(stored.rows[0]?.key_hash).toBe(createHash('sha256').update(created.key).digest('hex'))
      } finally {
        await client.end()
      }
    } finally {
      await database.drop()
    }
  })
})

describe('unreadable input', () => {
  it('import of a missing file: exit 1, one line', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'openbook-cli-'))
    try {
      const result = await openbook(['import', join(dataDir, 'missing.ndjson')], { DATA_DIR: dataDir })
      expectOneLineFailure(result, 1, /cannot read/)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

})
