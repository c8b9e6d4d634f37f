import { afterEach, beforeAll, expect, it, vi } from 'vitest'
import { createApiKey, createApiKeys, listApiKeys, revokeApiKeys } from '../../src/domain/api-keys.js'
import type { Store } from '../../src/store/types.js'
import { BRAND, createOrg, type OrgFixture } from '../helpers/fixtures.js'
import { describeEachStore } from '../helpers/stores.js'

const HOUR = 3_600_000

/** The database's clock, as the request path's key lookup reads it. */
async function databaseNow(store: Store): Promise<number> {
  const [row] = await store.admin((sql) =>
    sql.query<{ ms: number | string }>('SELECT (extract(epoch FROM now()) * 1000)::float8 AS ms'),
  )
  return Number(row?.ms)
}

describeEachStore('API keys on the database clock, and in batches (%s)', (testStore) => {
  let ent: OrgFixture
  let pro: OrgFixture
  const input = (org: OrgFixture) => ({
    orgId: org.id,
    actorEmail: org.ownerEmail,
    env: 'test' as const,
    brand: BRAND,
  })

  beforeAll(async () => {
    ent = await createOrg(testStore.store, 'org_batch_ent', 'enterprise')
    pro = await createOrg(testStore.store, 'org_batch_pro', 'professional')
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it("an expiry is computed and checked on the database's clock, not on the command line's", async () => {
    const { store } = testStore
    // The command line's clock two hours behind the database's.
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(Date.now() - 2 * HOUR)
    const key = await store.admin((sql) => createApiKey(sql, { ...input(ent), expiry: { inMs: HOUR } }))
    vi.useRealTimers()
    const now = await databaseNow(store)
    const expiresAt = Date.parse(key.expiresAt ?? '')
    expect(expiresAt).toBeGreaterThan(now + HOUR - 60_000)
    expect(expiresAt).toBeLessThanOrEqual(now + HOUR)

    // An instant ahead by the command line's clock, behind by the database's: refused.
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(Date.now() - 2 * HOUR)
    const passed = new Date(Date.now() + HOUR)
    const refusal = await store
      .admin((sql) => createApiKey(sql, { ...input(ent), expiry: { at: passed } }))
      .catch((e: unknown) => e)
    expect(String((refusal as Error).message)).toMatch(
      /^the expiry must be in the future .*by the database's clock/,
    )
  })

  it('creates N keys in one transaction, under the plan rule for all N', async () => {
    const { store } = testStore
    const keys = await store.admin((sql) => createApiKeys(sql, { ...input(ent), name: 'rotation' }, 25))
    expect(keys).toHaveLength(25)
    expect(new Set(keys.map((k) => k.key)).size).toBe(25)
    expect(new Set(keys.map((k) => k.id)).size).toBe(25)
    for (const key of keys) {
      expect(key).toMatchObject({ orgId: ent.id, env: 'test', name: 'rotation', expiresAt: null })
      expect(key.key).toMatch(/^svc_test_[0-9a-f]{64}$/)
      expect(key.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T/)
    }
    // Professional allows 5 active keys: 6 at once are refused, and none is written.
    const refusal = await store
      .admin((sql) => createApiKeys(sql, input(pro), 6))
      .catch((e: unknown) => e as Error)
    expect((refusal as Error).message).toBe(
      'the professional plan allows 5 active API keys and org_batch_pro has 0: 6 more would make 6',
    )
    expect(await store.admin((sql) => listApiKeys(sql, pro.id))).toEqual([])
    expect(await store.admin((sql) => createApiKeys(sql, input(pro), 5))).toHaveLength(5)
  })

  it("revokes an organization's keys by name, by age, or all, each in one statement", async () => {
    const { store } = testStore
    const org = await createOrg(store, 'org_batch_revoke', 'enterprise')
    const old = await store.admin((sql) => createApiKeys(sql, { ...input(org), name: 'old' }, 3))
    await store.admin((sql) =>
      sql.query(`UPDATE api_keys SET created_at = now() - interval '100 days' WHERE id = ANY($1::text[])`, [
        old.map((k) => k.id),
      ]),
    )
    const named = await store.admin((sql) => createApiKeys(sql, { ...input(org), name: 'ci' }, 2))
    const other = await store.admin((sql) => createApiKeys(sql, input(org), 2))
    const ids = (keys: readonly { id: string }[]) => keys.map((k) => k.id).sort()

    const byAge = await store.admin((sql) =>
      revokeApiKeys(sql, { orgId: org.id, olderThanMs: 90 * 24 * HOUR }),
    )
    expect(ids(byAge.revoked)).toEqual(ids(old))
    const byName = await store.admin((sql) => revokeApiKeys(sql, { orgId: org.id, name: 'ci' }))
    expect(ids(byName.revoked)).toEqual(ids(named))
    const rest = await store.admin((sql) => revokeApiKeys(sql, { orgId: org.id }))
    expect(ids(rest.revoked)).toEqual(ids(other))
    expect((await store.admin((sql) => revokeApiKeys(sql, { orgId: org.id }))).revoked).toEqual([])
    const listed = await store.admin((sql) => listApiKeys(sql, org.id))
    expect(listed.map((k) => k.status)).toEqual(Array(7).fill('revoked'))
    // Other organizations' keys are untouched.
    expect((await store.admin((sql) => listApiKeys(sql, pro.id))).every((k) => k.status === 'active')).toBe(
      true,
    )
    await expect(store.admin((sql) => revokeApiKeys(sql, { orgId: 'org_nope' }))).rejects.toThrow(
      'unknown organization: org_nope',
    )
  })
})
