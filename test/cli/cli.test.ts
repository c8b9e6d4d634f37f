import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { LATEST_VERSION, readMigrations } from '../../src/store/schema/schema-version.js'
import type { StoreKind } from '../../src/store/types.js'
import { cleanEnv, freePort, type RunningProcess, start } from '../helpers/process.js'
import {
  createTestDatabase,
  describeEachStoreKind,
  migratedDataDir,
  postgresAvailable,
  type TestDatabase,
} from '../helpers/stores.js'
import { type Line, ndjson, organizationLines } from './fixtures.js'
import { type CliResult, json, openbook } from './run.js'

const SECRET = /^svc_(test|live)_[0-9a-f]{64}$/

function expectOneLineFailure(result: CliResult, code: number, pattern: RegExp): void {
  expect(result.code, result.stderr).toBe(code)
  expect(result.stdout).toBe('')
  expect(result.stderr.trim().split('\n')).toHaveLength(1)
  expect(result.stderr).toMatch(pattern)
}

const tempDirs: string[] = []
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'openbook-cli-'))
  tempDirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
})

interface OrgRow {
  id: string
  plan: string
  members: number
  customers: number
  appointments: number
  activeKeys: number
}

/**
 * Every command runs as the real `openbook` binary in a subprocess, against PostgreSQL and against
 * the embedded store while an embedded server holds it (the CLI then hands the command to the
 * server). A real HTTP server beside the CLI shows that what the CLI does takes effect at once.
 */
const target = (kind: StoreKind) => (kind === 'postgres' ? 'postgres' : 'embedded beside a running server')

describeEachStoreKind(
  (kind) => `openbook command line on ${target(kind)}`,
  (kind) => {
    const onPostgres = kind === 'postgres'
    let env: Record<string, string>
    let database: TestDatabase | undefined
    let server: RunningProcess | undefined
    let base = ''
    const cli = (...args: string[]) => openbook(args, env)
    const cliWithInput = (input: string, ...args: string[]) => openbook(args, env, input)
    /** `orgs create … --owner-email … --json`. */
    const createOrgWithOwner = (name: string, plan: string, id: string, ownerEmail: string) =>
      cli('orgs', 'create', '--name', name, '--plan', plan, '--id', id, '--owner-email', ownerEmail, '--json')
    /** `keys create` by the owner of org_ent, the enterprise organization made below. */
    const entKey = (keyEnv: 'test' | 'live', ...args: string[]) =>
      cli('keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', keyEnv, ...args)

    async function startServer(): Promise<void> {
      const port = await freePort()
      base = `http://127.0.0.1:${port}`
      server = start('node', ['dist/server.js'], cleanEnv({ ...env, PORT: String(port), LOG_LEVEL: 'warn' }))
      await server.waitFor(onPostgres ? /privileged role/ : /Try:/, 30_000)
      for (let i = 0; i < 100; i++) {
        if (
          await fetch(`${base}/openapi.json`).then(
            (r) => r.ok,
            () => false,
          )
        )
          return
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      throw new Error(`server did not come up:\n${server.output()}`)
    }

    /** GET on the API with a key, over real HTTP. */
    async function get(path: string, key: string) {
      if (!server) await startServer()
      const response = await fetch(`${base}/api/public/v1/${path}`, {
        headers: { authorization: `Bearer ${key}` },
      })
      return { status: response.status, body: (await response.json()) as Record<string, unknown> }
    }

    beforeAll(async () => {
      if (onPostgres) {
        database = await createTestDatabase()
        env = { DATABASE_URL: database.url }
      } else {
        // Not a first start (the next describe has one): a migrated DATA_DIR spares the server PGlite's initdb.
        const { dir } = migratedDataDir()
        tempDirs.push(dir)
        env = { DATA_DIR: dir }
        await startServer()
      }
    }, patience(60_000))

    afterAll(async () => {
      if (server) {
        server.child.kill('SIGTERM')
        expect(await server.exited()).toBe(0)
      }
      await database?.drop()
    })

    it('migrate applies the schema, then has nothing to do; --json prints one document', async () => {
      const first = json<{ version: number; applied: string[] }>(await cli('migrate', '--json'))
      expect(first.version).toBe(LATEST_VERSION)
      // The embedded server migrated its store when it started.
      expect(first.applied).toEqual(onPostgres ? readMigrations().map((m) => m.name) : [])
      const again = await cli('migrate')
      expect(again.code).toBe(0)
      expect(again.stdout).toContain(`already at version ${LATEST_VERSION}`)
    })

    it.runIf(onPostgres)(
      'migrate restores a grant that was lost, says so in one line, then has nothing to say',
      async () => {
        const client = new pg.Client({ connectionString: database?.url })
        await client.connect()
        try {
          await client.query('REVOKE SELECT ON customers FROM openbook_reader')
        } finally {
          await client.end()
        }
        const repaired = await cli('migrate')
        expect(repaired.code).toBe(0)
        expect(repaired.stdout).toBe(
          `repaired: granted SELECT on table customers to openbook_reader\nschema already at version ${LATEST_VERSION}\n`,
        )
        expect((await cli('migrate')).stdout).toBe(`schema already at version ${LATEST_VERSION}\n`)
      },
    )

    it('orgs create and list, with an owner', async () => {
      const created = json<{ id: string; plan: string; owner: { email: string } }>(
        await createOrgWithOwner('Studio Pro', 'professional', 'org_pro', 'owner@pro.test'),
      )
      expect(created).toMatchObject({
        id: 'org_pro',
        plan: 'professional',
        owner: { email: 'owner@pro.test' },
      })
      json(await createOrgWithOwner('Free', 'free', 'org_free', 'owner@free.test'))
      json(await createOrgWithOwner('Starter', 'starter', 'org_starter', 'owner@starter.test'))
      json(await createOrgWithOwner('Big', 'enterprise', 'org_ent', 'owner@ent.test'))
      const generated = json<{ id: string }>(
        await cli('orgs', 'create', '--name', 'No id', '--plan', 'free', '--json'),
      )
      expect(generated.id).toMatch(/^org_[0-9a-f]{16}$/)
      const list = json<OrgRow[]>(await cli('orgs', 'list', '--json'))
      expect(list.find((o) => o.id === 'org_pro')).toMatchObject({
        plan: 'professional',
        members: 1,
        activeKeys: 0,
      })
      expect((await cli('orgs', 'list')).stdout).toMatch(/org_pro\s+Studio Pro\s+professional/)
    })

    it('orgs create refuses a bad plan, a taken id (exit 1) and a missing name (exit 2)', async () => {
      expectOneLineFailure(await cli('orgs', 'create', '--name', 'X', '--plan', 'gold'), 1, /bad plan "gold"/)
      expectOneLineFailure(
        await cli('orgs', 'create', '--name', 'X', '--plan', 'free', '--id', 'org_pro'),
        1,
        /exists already/,
      )
      expect((await cli('orgs', 'create', '--plan', 'free')).code).toBe(2)
    })

    it('orgs create checks --name and --id before the database sees them', async () => {
      const create = (...args: string[]) => cli('orgs', 'create', '--plan', 'free', ...args)
      expectOneLineFailure(await create('--name', ''), 1, /^openbook: --name must not be empty/)
      expectOneLineFailure(await create('--name', '   '), 1, /^openbook: --name must not be empty/)
      expectOneLineFailure(
        await create('--name', 'x'.repeat(201)),
        1,
        /^openbook: --name must be at most 200 characters/,
      )
      expectOneLineFailure(await create('--name', 'X', '--id', ''), 1, /^openbook: --id must not be empty/)
      expectOneLineFailure(
        await create('--name', 'X', '--id', 'o'.repeat(129)),
        1,
        /^openbook: --id must be at most 128 characters/,
      )
      expectOneLineFailure(
        await create('--name', 'X', '--id', 'org_mail', '--owner-email', 'nobody'),
        1,
        /^openbook: bad email "nobody"/,
      )
      const names = json<OrgRow[]>(await cli('orgs', 'list', '--json')).map((o) => o.id)
      expect(names).not.toContain('org_mail')
    })

    it('keys create: owner or admin only, and only on plans with API access', async () => {
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_free', '--as', 'owner@free.test', '--env', 'test'),
        1,
        /free plan .* no API access/,
      )
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_starter', '--as', 'owner@starter.test', '--env', 'test'),
        1,
        /starter plan .* no API access/,
      )
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@ent.test', '--env', 'test'),
        1,
        /not a member/,
      )
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_nope', '--as', 'owner@pro.test', '--env', 'test'),
        1,
        /unknown organization/,
      )
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@pro.test', '--env', 'prod'),
        1,
        /bad env/,
      )
    })

    it('keys create refuses a member, accepts an admin', async () => {
      const memberLines = [
        { type: 'user', id: 'usr_member_pro', email: 'member@pro.test' },
        { type: 'user', id: 'usr_admin_pro', email: 'admin@pro.test' },
        { type: 'membership', orgId: 'org_pro', userId: 'usr_member_pro', role: 'member' },
        { type: 'membership', orgId: 'org_pro', userId: 'usr_admin_pro', role: 'admin' },
      ]
      const imported = await cliWithInput(ndjson(memberLines), 'import', '-')
      expect(imported.code, imported.stderr).toBe(0)
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_pro', '--as', 'member@pro.test', '--env', 'test'),
        1,
        /only an owner or admin/,
      )
      const byAdmin = json<{ key: string }>(
        await cli('keys', 'create', '--org', 'org_pro', '--as', 'admin@pro.test', '--env', 'live', '--json'),
      )
      expect(byAdmin.key).toMatch(/^svc_live_[0-9a-f]{64}$/)
    })

    it('keys create --json prints exactly the documented fields; professional allows 5 active keys', async () => {
      // One live key exists from the admin test; four more reach the limit.
      const created: { id: string; key: string }[] = []
      for (let i = 0; i < 4; i++) {
        const key = json<Record<string, unknown>>(
          await cli(
            'keys',
            'create',
            '--org',
            'org_pro',
            '--as',
            'owner@pro.test',
            '--env',
            'test',
            '--name',
            `k${i}`,
            '--json',
          ),
        )
        expect(Object.keys(key).sort()).toEqual([
          'createdAt',
          'env',
          'expiresAt',
          'id',
          'key',
          'name',
          'orgId',
          'prefix',
        ])
        expect(key).toMatchObject({
          env: 'test',
          orgId: 'org_pro',
          name: `k${i}`,
          prefix: 'svc_test_',
          expiresAt: null,
        })
        expect(key.key).toMatch(SECRET)
        created.push(key as { id: string; key: string })
      }
      expect(new Set(created.map((k) => k.key)).size).toBe(4)
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@pro.test', '--env', 'test'),
        1,
        /allows 5 active API keys/,
      )
      const revoked = await cli('keys', 'revoke', created[0]?.id ?? '')
      expect(revoked.code).toBe(0)
      expect(revoked.stdout).toMatch(/revoked key_/)
      expect(
        (await cli('keys', 'create', '--org', 'org_pro', '--as', 'owner@pro.test', '--env', 'test')).code,
      ).toBe(0)
    })

    it('enterprise has no key limit', async () => {
      for (let i = 0; i < 6; i++) {
        expect((await entKey('live')).code).toBe(0)
      }
    })

    it(
      'expiry: --expires-in, --expires-at, bad durations; an expired key lists as expired and reads nothing',
      async () => {
        const inDays = json<{ expiresAt: string }>(await entKey('test', '--expires-in', '90d', '--json'))
        const days = (Date.parse(inDays.expiresAt) - Date.now()) / 86_400_000
        expect(days).toBeGreaterThan(89.9)
        expect(days).toBeLessThan(90.1)
        const at = json<{ expiresAt: string }>(
          await entKey('test', '--expires-at', '2099-01-02T03:04:05Z', '--json'),
        )
        expect(at.expiresAt).toBe('2099-01-02T03:04:05.000Z')
        for (const bad of ['90', '1w', '-1d', 'soon']) {
          expectOneLineFailure(await entKey('test', '--expires-in', bad), 1, /bad duration/)
        }
        expectOneLineFailure(await entKey('test', '--expires-at', 'tomorrow'), 1, /bad --expires-at/)
        expectOneLineFailure(
          await entKey('test', '--expires-at', '2001-01-01T00:00:00Z'),
          1,
          /must be in the future/,
        )
        // A day the calendar does not have is not quietly moved to another.
        for (const day of ['2027-02-30T00:00:00Z', '2027-02-29', '2027-04-31T10:00:00+02:00']) {
          expectOneLineFailure(
            await entKey('test', '--expires-at', day),
            1,
            /bad --expires-at ".*": no such date/,
          )
        }
        expect(
          json<{ expiresAt: string }>(await entKey('test', '--expires-at', '2028-02-29', '--json')).expiresAt,
        ).toBe('2028-02-29T00:00:00.000Z')
        for (const far of [
          ['--expires-in', '99999999999d'],
          ['--expires-in', `${'9'.repeat(400)}s`],
          ['--expires-at', '2999-01-01T00:00:00Z'],
        ]) {
          expectOneLineFailure(
            await entKey('test', ...far),
            1,
            /too far: an expiry must lie within 100 years/,
          )
        }
        expectOneLineFailure(await entKey('test', '--expires-in', '0s'), 1, /must be in the future/)
        const short = json<{ id: string; key: string }>(await entKey('test', '--expires-in', '1s', '--json'))
        await new Promise((resolve) => setTimeout(resolve, 1_200))
        const list = json<{ id: string; status: string }[]>(
          await cli('keys', 'list', '--org', 'org_ent', '--json'),
        )
        expect(list.find((k) => k.id === short.id)?.status).toBe('expired')
        expect(await get('customers', short.key)).toEqual({
          status: 401,
          body: { error: 'Unauthorized', message: 'Invalid or expired API key', code: 'expired_api_key' },
        })
      },
      patience(120_000),
    ) // fifteen CLI processes: 25-30 s on an idle machine

    it('keys list shows hints and statuses, never a secret', async () => {
      const created = json<{ id: string; key: string }>(await entKey('live', '--json'))
      expect((await cli('keys', 'revoke', created.id)).code).toBe(0)
      for (const output of [
        (await cli('keys', 'list', '--org', 'org_ent', '--json')).stdout,
        (await cli('keys', 'list', '--org', 'org_ent')).stdout,
      ]) {
        expect(output).not.toContain(created.key)
        expect(output).not.toContain(created.key.slice(-64))
        expect(output).not.toMatch(/[0-9a-f]{64}/)
      }
      const list = json<
        { id: string; hint: string; status: string; revokedAt: string | null; lastUsedAt: string | null }[]
      >(await cli('keys', 'list', '--org', 'org_ent', '--json'))
      const row = list.find((k) => k.id === created.id)
      expect(row).toMatchObject({
        hint: `svc_live_…${created.key.slice(-4)}`,
        status: 'revoked',
        lastUsedAt: null,
      })
      expect(row?.revokedAt).toMatch(/^\d{4}-/)
      expect(list.some((k) => k.status === 'active')).toBe(true)
      expectOneLineFailure(await cli('keys', 'list', '--org', 'org_nope'), 1, /unknown organization/)
      expectOneLineFailure(await cli('keys', 'revoke', 'key_nope'), 1, /unknown API key/)
    })

    it('keys revoke takes effect on the very next request', async () => {
      const created = json<{ id: string; key: string }>(await entKey('live', '--json'))
      expect((await get('customers?limit=1', created.key)).status).toBe(200)
      expect((await cli('keys', 'revoke', created.id)).code).toBe(0)
      expect(await get('customers?limit=1', created.key)).toEqual({
        status: 401,
        body: { error: 'Unauthorized', message: 'Invalid or expired API key', code: 'revoked_api_key' },
      })
    })

    // Beside a running embedded server the server's own brand applies: see the next describe.
    it.skipIf(!onPostgres)('API_KEY_BRAND sets the key prefix', async () => {
      const key = json<{ key: string; prefix: string }>(
        await openbook(
          ['keys', 'create', '--org', 'org_ent', '--as', 'owner@ent.test', '--env', 'test', '--json'],
          { ...env, API_KEY_BRAND: 'acme' },
        ),
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
      const help = await cli('--help')
      expect(help.code).toBe(0)
      expect(help.stdout).toMatch(/keys/)
    })

    it('import: counts by type, readable through the API at once, and a second import changes nothing', async () => {
      const file = join(tempDir(), 'two-orgs.ndjson')
      writeFileSync(
        file,
        ndjson([
          ...organizationLines('org_imp_a', 'a@imp.test'),
          ...organizationLines('org_imp_b', 'b@imp.test'),
        ]),
      )
      const summary = json<{ lines: number; counts: Record<string, number> }>(
        await cli('import', file, '--json'),
      )
      expect(summary).toEqual({
        lines: 20,
        counts: {
          organization: 2,
          user: 2,
          membership: 2,
          staff: 2,
          service: 2,
          customer: 6,
          appointment: 4,
        },
        firstLoad: [],
        revokedKeys: [],
      })
      const human = await cli('import', file)
      expect(human.stdout).toMatch(/^imported 20 lines: .*customer 6.*appointment 4/)
      const orgs = json<OrgRow[]>(await cli('orgs', 'list', '--json'))
      expect(orgs.find((o) => o.id === 'org_imp_a')).toMatchObject({
        plan: 'enterprise',
        members: 1,
        customers: 2,
        appointments: 2,
      })

      const key = json<{ key: string }>(
        await cli('keys', 'create', '--org', 'org_imp_a', '--as', 'a@imp.test', '--env', 'test', '--json'),
      ).key
      const customers = await get('customers', key)
      expect(customers.status).toBe(200)
      expect((customers.body.data as { id: string }[]).map((c) => c.id)).toEqual([
        'cus_org_imp_a_2',
        'cus_org_imp_a_1',
      ])
      expect(customers.body.pagination).toEqual({ limit: 50, offset: 0, total: 2, hasMore: false })
      const appointments = await get('appointments?customerId=cus_org_imp_a_1', key)
      expect(
        (appointments.body.data as { id: string; priceCents: number }[]).map((a) => [a.id, a.priceCents]),
      ).toEqual([['apt_org_imp_a_1', 4_500]])
    })

    it(
      'an import that moves an organization to a plan without API access revokes its active keys, says how many (--json too), and the keys stop working',
      async () => {
        const owners = { org_down_a: 'a@down.test', org_down_b: 'b@down.test' } as const
        const keys: Record<string, { id: string; key: string }[]> = {}
        for (const [orgId, email] of Object.entries(owners)) {
          json(await createOrgWithOwner(`Studio ${orgId}`, 'enterprise', orgId, email))
          const create = () => cli('keys', 'create', '--org', orgId, '--as', email, '--env', 'live', '--json')
          keys[orgId] =
            orgId === 'org_down_a' ? [json(await create()), json(await create())] : [json(await create())]
        }
        // Already revoked: not counted again, and its revocation time stays.
        const [gone, ...active] = keys.org_down_a ?? []
        expect((await cli('keys', 'revoke', String(gone?.id))).code).toBe(0)
        const revokedAt = json<{ id: string; revokedAt: string }[]>(
          await cli('keys', 'list', '--org', 'org_down_a', '--json'),
        ).find((k) => k.id === gone?.id)?.revokedAt
        expect((await get('customers?limit=1', String(active[0]?.key))).status).toBe(200)

        const downgrade = (orgId: string, plan: string) =>
          ndjson([{ type: 'organization', id: orgId, name: `Studio ${orgId}`, plan }])
        const human = await cliWithInput(downgrade('org_down_a', 'starter'), 'import', '-')
        expect(human.code, human.stderr).toBe(0)
        expect(human.stdout).toBe(
          'imported 1 lines: organization 1\n' +
            'revoked 1 active API key of org_down_a: its starter plan has no API access\n',
        )
        const listed = json<{ id: string; status: string; revokedAt: string }[]>(
          await cli('keys', 'list', '--org', 'org_down_a', '--json'),
        )
        expect(listed.map((k) => k.status)).toEqual(['revoked', 'revoked'])
        expect(listed.find((k) => k.id === gone?.id)?.revokedAt).toBe(revokedAt)
        for (const key of active) expect((await get('customers?limit=1', key.key)).status).toBe(401)
        expect(
          json<OrgRow[]>(await cli('orgs', 'list', '--json')).find((o) => o.id === 'org_down_a'),
        ).toMatchObject({ plan: 'starter', activeKeys: 0 })

        // --json: the count by organization; org_down_a, starter already, has nothing left to revoke.
        const file = join(tempDir(), 'downgrade.ndjson')
        writeFileSync(file, downgrade('org_down_a', 'starter') + downgrade('org_down_b', 'free'))
        expect(json(await cli('import', file, '--json'))).toMatchObject({
          lines: 2,
          revokedKeys: [{ orgId: 'org_down_b', plan: 'free', keys: 1 }],
        })
        for (const key of keys.org_down_b ?? [])
          expect((await get('customers?limit=1', key.key)).status).toBe(401)
        // The same file again changes nothing.
        expect(json(await cli('import', file, '--json'))).toMatchObject({ revokedKeys: [] })
        // A dozen commands, each a process of its own: more than the default 30 s on a loaded machine.
      },
      patience(120_000),
    )

    it('import is all or nothing: one bad line rejects the file, named by line and field', async () => {
      const fresh = organizationLines('org_bad', 'x@bad.test')
      const cases: [Line[], RegExp][] = [
        [[fresh[0] as Line, { type: 'user' }, '{not json' as unknown as Line], /line 2: user\.id/],
        [
          [fresh[0] as Line, fresh[1] as Line, 'nope' as unknown as Line],
          /line 3: not a JSON object|line 3: not valid JSON/,
        ],
        [[fresh[0] as Line, { type: 'invoice', id: 'x' }], /line 2: type: must be one of/],
        [
          [fresh[0] as Line, { type: 'organization', id: 'org_x', name: 'X', plan: 'gold' }],
          /line 2: organization\.plan/,
        ],
        [
          [fresh[0] as Line, { ...(fresh[5] as Line), createdAt: 'yesterday' }],
          /line 2: customer\.createdAt/,
        ],
        [[fresh[0] as Line, { ...(fresh[5] as Line), colour: 'red' }], /line 2: customer\.colour/],
        // A reference into another organization is a reference to nothing.
        [
          [...fresh.slice(0, 5), { ...(fresh[8] as Line), customerId: 'cus_org_imp_b_1' }],
          /line 6: appointment\.customerId/,
        ],
        [
          [
            ...fresh.slice(0, 3),
            { type: 'membership', orgId: 'org_bad', userId: 'usr_nobody', role: 'owner' },
          ],
          /line 4: membership\.userId/,
        ],
      ]
      for (const [lines, pattern] of cases) {
        const text = lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n')
        expectOneLineFailure(await cliWithInput(text, 'import', '-'), 1, pattern)
      }
      // The file with a bad last line: its good lines did not land either.
      expectOneLineFailure(
        await cliWithInput(`${ndjson(fresh)}{"type":"staff"}\n`, 'import', '-'),
        1,
        /line 11: staff\.id/,
      )
      const orgs = json<OrgRow[]>(await cli('orgs', 'list', '--json'))
      expect(orgs.map((o) => o.id)).not.toContain('org_bad')
      expect(orgs.map((o) => o.id)).not.toContain('org_x')
      expectOneLineFailure(await cli('import', join(tempDir(), 'missing.ndjson')), 1, /cannot read/)
      // A directory is named as such, not as a raw EISDIR.
      expectOneLineFailure(await cli('import', tempDir()), 1, /^openbook: \/\S+ is not a file\n$/)
    })

    it('import refuses a line over 1 MiB and bytes that are not UTF-8 in one line, exit 1; a BOM is skipped', async () => {
      const dir = tempDir()
      const org = ndjson(organizationLines('org_huge', 'o@huge.test').slice(0, 1))
      // 8 MiB on one line without a newline; beside a running server too, where the client must
      // stop sending once the server has answered.
      const huge = join(dir, 'huge.ndjson')
      writeFileSync(huge, Buffer.concat([Buffer.from(org), Buffer.alloc(8 * 1024 * 1024, 'x')]))
      expectOneLineFailure(await cli('import', huge), 1, /^openbook: line 2: line too long \(over 1 MiB\)\n$/)
      const latin1 = join(dir, 'latin1.ndjson')
      writeFileSync(
        latin1,
        Buffer.from(
          `${org}{"type":"user","id":"usr_huge","email":"o@huge.test","name":"Jos\xe9"}\n`,
          'latin1',
        ),
      )
      expectOneLineFailure(
        await cli('import', latin1),
        1,
        /^openbook: line 2: user\.name: not valid UTF-8\n$/,
      )
      const bom = join(dir, 'bom.ndjson')
      writeFileSync(bom, `\ufeff${org}`)
      expect(json<{ counts: Record<string, number> }>(await cli('import', bom, '--json')).counts).toEqual({
        organization: 1,
      })
    })

    it('seed: exact counts, skewed sizes, the same data for the same seed', async () => {
      const args = [
        'seed',
        '--orgs',
        '14',
        '--customers',
        '3000',
        '--appointments',
        '6000',
        '--seed',
        '3',
        '--json',
      ]
      const first = json<{ counts: Record<string, number>; orgIds: string[] }>(await cli(...args))
      expect(first.counts).toMatchObject({ organization: 14, customer: 3000, appointment: 6000 })
      const seeded = json<OrgRow[]>(await cli('orgs', 'list', '--json')).filter((o) =>
        first.orgIds.includes(o.id),
      )
      expect(seeded).toHaveLength(14)
      const sizes = seeded.map((o) => o.customers).sort((a, b) => b - a)
      expect(sizes[0]).toBeGreaterThan(10 * (sizes.at(-1) ?? 1))
      // Seeding again with the same seed upserts the very same rows: nothing changes.
      json(await cli(...args))
      const again = json<OrgRow[]>(await cli('orgs', 'list', '--json')).filter((o) =>
        first.orgIds.includes(o.id),
      )
      expect(again).toEqual(seeded)
    })

    it('vacuum gives back the space a failed import left; --full shrinks the database', async () => {
      // 30,000 customers and one bad line last: all of it rolled back, its rows left behind as dead.
      let text = `${JSON.stringify({ type: 'organization', id: 'org_vac', name: 'Vac', plan: 'free' })}\n`
      for (let i = 0; i < 30_000; i++)
        text += `${JSON.stringify({ type: 'customer', id: `cus_vac_${i}`, orgId: 'org_vac', firstName: 'x'.repeat(40), isActive: true, createdAt: '2025-01-01T00:00:00Z', updatedAt: '2025-01-01T00:00:00Z' })}\n`
      text += '{"type":"nope"}\n'
      expect((await cliWithInput(text, 'import', '-')).code).toBe(1)
      const plain = json<{ full: boolean; bytesBefore: number; bytesAfter: number }>(
        await cli('vacuum', '--json'),
      )
      expect(plain.full).toBe(false)
      const full = json<{ full: boolean; bytesBefore: number; bytesAfter: number }>(
        await cli('vacuum', '--full', '--json'),
      )
      expect(full.full).toBe(true)
      expect(full.bytesAfter).toBeLessThan(full.bytesBefore)
      expect((await cli('vacuum')).stdout).toMatch(/^vacuumed: database [\d.]+ MB → [\d.]+ MB\n$/)
    })
  },
)

describe('openbook command line on the embedded store, no server running', () => {
  const env = { DATA_DIR: '' }
  const cli = (...args: string[]) => openbook(args, env)
  beforeAll(() => {
    env.DATA_DIR = tempDir()
  })

  it(
    'creates and migrates the store on first use; orgs, keys, import and seed work on it directly',
    async () => {
      expect(json<{ version: number }>(await cli('migrate', '--json')).version).toBe(LATEST_VERSION)
      json(
        await cli(
          'orgs',
          'create',
          '--name',
          'Solo',
          '--plan',
          'professional',
          '--id',
          'org_solo',
          '--owner-email',
          'o@solo.test',
          '--json',
        ),
      )
      const key = json<{ id: string; key: string }>(
        await cli('keys', 'create', '--org', 'org_solo', '--as', 'o@solo.test', '--env', 'test', '--json'),
      )
      expect(key.key).toMatch(SECRET)
      const branded = await openbook(
        ['keys', 'create', '--org', 'org_solo', '--as', 'o@solo.test', '--env', 'live', '--json'],
        { ...env, API_KEY_BRAND: 'acme' },
      )
      expect(json<{ key: string }>(branded).key).toMatch(/^acme_live_[0-9a-f]{64}$/)
      expectOneLineFailure(
        await cli('keys', 'create', '--org', 'org_solo', '--as', 'nobody@solo.test', '--env', 'test'),
        1,
        /not a member/,
      )
      const imported = await openbook(
        ['import', '-', '--json'],
        env,
        ndjson(organizationLines('org_emb', 'e@emb.test')),
      )
      expect(json(imported)).toMatchObject({ lines: 10, counts: { customer: 3, appointment: 2 } })
      expect(
        json(await cli('seed', '--orgs', '3', '--customers', '30', '--appointments', '60', '--json')),
      ).toMatchObject({
        counts: { organization: 3, customer: 30, appointment: 60 },
      })
      expect((await cli('keys', 'revoke', key.id)).code).toBe(0)
      const listed = json<{ id: string; status: string }[]>(
        await cli('keys', 'list', '--org', 'org_solo', '--json'),
      )
      expect(listed.find((k) => k.id === key.id)?.status).toBe('revoked')
      expect(listed).toHaveLength(2)
      const orgs = json<OrgRow[]>(await cli('orgs', 'list', '--json'))
      expect(orgs.map((o) => o.id)).toEqual(expect.arrayContaining(['org_solo', 'org_emb']))
      expect(orgs).toHaveLength(5)
      // PGlite has no autovacuum: import and seed leave planner statistics behind them.
      const store = await createEmbeddedStore(env.DATA_DIR)
      try {
        const stats = await store.admin((sql) =>
          sql.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stats WHERE tablename IN ('customers', 'appointments')",
          ),
        )
        expect(stats[0]?.n).toBeGreaterThan(10)
      } finally {
        await store.close()
      }
    },
    patience(240_000),
  )
})

describe.skipIf(!postgresAvailable())('no table holds a created secret (PostgreSQL)', () => {
  it('stores only the SHA-256 and a hint', async () => {
    const database = await createTestDatabase()
    const env = { DATABASE_URL: database.url }
    try {
      json(await openbook(['migrate', '--json'], env))
      json(
        await openbook(
          [
            'orgs',
            'create',
            '--name',
            'S',
            '--plan',
            'enterprise',
            '--id',
            'org_s',
            '--owner-email',
            'o@s.test',
            '--json',
          ],
          env,
        ),
      )
      const created = json<{ id: string; key: string }>(
        await openbook(
          ['keys', 'create', '--org', 'org_s', '--as', 'o@s.test', '--env', 'live', '--json'],
          env,
        ),
      )
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        const tables = await client.query<{ table_name: string }>(
          "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'",
        )
        expect(tables.rows.length).toBeGreaterThanOrEqual(8)
        for (const { table_name } of tables.rows) {
          const dump = await client.query<{ row: string }>(
            `SELECT to_jsonb(t)::text AS row FROM ${table_name} t`,
          )
          for (const { row } of dump.rows) {
            expect(row).not.toContain(created.key)
            expect(row).not.toContain(created.key.slice(-64))
          }
        }
        const stored = await client.query<{ key_hash: string }>(
          'SELECT key_hash FROM api_keys WHERE id = $1',
          [created.id],
        )
        expect(stored.rows[0]?.key_hash).toBe(createHash('sha256').update(created.key).digest('hex'))
      } finally {
        await client.end()
      }
    } finally {
      await database.drop()
    }
  })
})
