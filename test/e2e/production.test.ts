import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { json, openbook } from '../cli/run.js'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import { dropRole, TEST_ROLE_PREFIX } from '../helpers/roles.js'
import { postgresAvailable, urlFor } from '../helpers/stores.js'

/**
 * The production sequence of docs/operators/production.md, run as a new user would: a non-superuser owner migrates, a
 * dedicated login role joins openbook_reader, and `node dist/server.js` (what `npm start` execs)
 * serves with that role. Real binary, real PostgreSQL, real HTTP.
 */
describe.skipIf(!postgresAvailable())('the documented production sequence, as a non-superuser owner', () => {
  const suffix = randomBytes(4).toString('hex')
  const database = `openbook_prod_${suffix}`
  // Roles are cluster-wide: named with the run's tag, so that the global teardown checks they are gone.
  const roleName = (kind: string) => `${TEST_ROLE_PREFIX}${inject('roleTag')}_${kind}_${suffix}`
  const owner = roleName('owner')
  const api = roleName('api')
  const stranger = roleName('stranger')
  const bare = roleName('bare')
  const urlAs = (role: string) => {
    const url = new URL(urlFor(database))
    url.username = role
    return url.toString()
  }
  const asRoot = async (...statements: string[]) => {
    const client = new pg.Client({ connectionString: urlFor('test') })
    await client.connect()
    try {
      for (const statement of statements) await client.query(statement)
    } finally {
      await client.end()
    }
  }
  const psql = async (url: string, statement: string) => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      await client.query(statement)
    } finally {
      await client.end()
    }
  }

  beforeAll(async () => {
    await asRoot(
      `CREATE ROLE ${owner} LOGIN CREATEROLE`,
      `CREATE ROLE ${stranger} LOGIN`,
      `CREATE ROLE ${bare} LOGIN`,
      `CREATE DATABASE ${database} OWNER ${owner}`,
    )
  })
  afterAll(async () => {
    await asRoot(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    for (const role of [api, stranger, bare, owner]) await dropRole(urlFor('test'), role)
  })

  /** Starts the server binary; resolves once it listens, or with its exit code and output. */
  async function serve(url: string) {
    const port = await freePort()
    const server = start('node', ['dist/server.js'], cleanEnv({ DATABASE_URL: url, PORT: String(port) }))
    const outcome = await Promise.race([
      server.waitFor(/Server listening/).then(() => 'listening' as const),
      server.exited().then((code) => ({ code })),
    ])
    return { server, port, outcome }
  }

  async function listCustomers(port: number, key: string) {
    const response = await fetch(`http://127.0.0.1:${port}/api/public/v1/customers?limit=5`, {
      headers: { authorization: `Bearer ${key}` },
    })
    return { status: response.status, body: (await response.json()) as { data?: { id: string }[] } }
  }

  it(
    'migrate, a dedicated role, npm start: requests are served; the owner URL works too',
    async () => {
      const ownerEnv = { DATABASE_URL: urlAs(owner) }
      expect((await openbook(['migrate'], ownerEnv)).code).toBe(0)
      // docs/operators/production.md: psql "$DATABASE_URL" -c "CREATE ROLE openbook_api LOGIN PASSWORD '…' IN ROLE openbook_reader"
      await psql(urlAs(owner), `CREATE ROLE ${api} LOGIN PASSWORD 'change-me' IN ROLE openbook_reader`)
      expect(
        (
          await openbook(
            [
              'orgs',
              'create',
              '--name',
              'Nord',
              '--plan',
              'professional',
              '--id',
              'org_nord',
              '--owner-email',
              'a@nord.example',
            ],
            ownerEnv,
          )
        ).code,
      ).toBe(0)
      await openbook(
        ['import', '-'],
        ownerEnv,
        `{"type":"customer","id":"cus_1","orgId":"org_nord","firstName":"Ana","isActive":true,"createdAt":"2025-01-01T09:00:00Z","updatedAt":"2025-01-01T09:00:00Z"}\n`,
      ).then((r) => expect(r.code, r.stderr).toBe(0))
      const { key } = json<{ key: string }>(
        await openbook(
          ['keys', 'create', '--org', 'org_nord', '--as', 'a@nord.example', '--env', 'live', '--json'],
          ownerEnv,
        ),
      )

      for (const role of [api, owner]) {
        const { server, port, outcome } = await serve(urlAs(role))
        try {
          expect(outcome, server.output()).toBe('listening')
          const { status, body } = await listCustomers(port, key)
          expect(status).toBe(200)
          expect(body.data?.map((c) => c.id)).toEqual(['cus_1'])
          // The dedicated role gets no warning; the owner gets the one that recommends a dedicated role.
          expect(server.output().includes('privileged role')).toBe(role === owner)
          if (role === api) {
            // The server ends its idle connections: one warning each, without what node-postgres
            // hangs on the error (the client, its connection settings, the prepared statements' SQL).
            await asRoot(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '${api}'`)
            await server.waitFor(/idle database connection failed/)
            expect(server.output()).toContain('"code":"57P01"')
            expect(server.output()).not.toMatch(/parsedStatements|SELECT|connectionParameters/)
            expect((await listCustomers(port, key)).status).toBe(200)
          }
        } finally {
          server.child.kill('SIGTERM')
        }
        expect(await server.exited()).toBe(0)
      }
    },
    patience(60_000),
  )

  it(
    'a superuser migrate keeps the owner in charge: its commands still see and write every row',
    async () => {
      expect((await openbook(['migrate'], { DATABASE_URL: urlFor(database) })).code).toBe(0)
      const ownerEnv = { DATABASE_URL: urlAs(owner) }
      const listed = json<{ id: string }[]>(await openbook(['orgs', 'list', '--json'], ownerEnv))
      expect(listed.map((o) => o.id)).toContain('org_nord')
      const imported = await openbook(
        ['import', '-'],
        ownerEnv,
        `{"type":"customer","id":"cus_2","orgId":"org_nord","isActive":true,"createdAt":"2025-01-02T09:00:00Z","updatedAt":"2025-01-02T09:00:00Z"}\n`,
      )
      expect(imported.code, imported.stderr).toBe(0)
    },
    patience(60_000),
  )

  it(
    'an owner without CREATEROLE can migrate once openbook_reader exists',
    async () => {
      // openbook_reader exists (the first test's migrate made or found it); a second database whose owner may not create roles.
      const second = `${database}_b`
      await asRoot(`CREATE DATABASE ${second} OWNER ${bare}`)
      try {
        const url = new URL(urlFor(second))
        url.username = bare
        const result = await openbook(['migrate'], { DATABASE_URL: url.toString() })
        expect(result.code, result.stderr).toBe(0)
        expect(result.stdout).toMatch(/schema at version \d+/)
      } finally {
        await asRoot(`DROP DATABASE IF EXISTS ${second} WITH (FORCE)`)
      }
    },
    patience(60_000),
  )

  it(
    'a role that cannot act as openbook_reader or see the rows is refused in one line, not served 500s',
    async () => {
      const { server, outcome } = await serve(urlAs(stranger))
      expect(outcome).toEqual({ code: 1 })
      const lines = server.output().trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(
        new RegExp(
          `^openbook: the role in DATABASE_URL \\(${stranger}\\) is not a member of openbook_reader`,
        ),
      )

      const listed = await openbook(['orgs', 'list'], { DATABASE_URL: urlAs(stranger) })
      expect(listed.code).toBe(1)
      expect(listed.stdout).toBe('')
      expect(listed.stderr).toMatch(
        new RegExp(`^openbook: role ${stranger} cannot see openbook's rows .*run this command as ${owner}`),
      )
    },
    patience(60_000),
  )

  it(
    'start-up failures say what is wrong in words',
    async () => {
      const missing = new URL(urlFor(`${database}_missing`))
      const { server, outcome } = await serve(missing.toString())
      expect(outcome).toEqual({ code: 1 })
      expect(server.output().trim()).toMatch(
        /^openbook: cannot open the store: database "[a-z0-9_]+" does not exist; create the database.*\(3D000\)$/,
      )
    },
    patience(30_000),
  )
})
