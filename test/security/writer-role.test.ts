import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { bucketFaults } from '../helpers/buckets.js'
import {
  createTestDatabase,
  createTestRole,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'

// openbook_writer is the salon software's role (docs/writers.md): a booking application reads the
// organization, its staff and its services (both are foreign keys of appointments), keeps staff
// and services, and writes customers and appointments. It reads none of openbook's keys, users,
// memberships or list internals, and calls none of openbook's functions but the fold its triggers
// use. Each grant and each refusal, as a login member of the role.

const ORG = 'org_w'
const OTHER = 'org_w2'

describe.skipIf(!postgresAvailable())('the writer role a booking application logs in as (PostgreSQL)', () => {
  let database: TestDatabase
  let role: TestRole
  let writer: pg.Client

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
    const owner = new pg.Client({ connectionString: database.url })
    await owner.connect()
    try {
      await owner.query(
        `INSERT INTO organizations (id, name, plan) VALUES ($1, 'W', 'starter'), ($2, 'W2', 'free')`,
        [ORG, OTHER],
      )
      await owner.query(`INSERT INTO users (id, email) VALUES ('usr_1', 'a@w.test')`)
      await owner.query(`INSERT INTO memberships (org_id, user_id, role) VALUES ($1, 'usr_1', 'owner')`, [
        ORG,
      ])
      await owner.query(
        `INSERT INTO staff (org_id, id, name) VALUES ($1, 'stf_1', 'Ann'), ($2, 'stf_1', 'Bo')`,
        [ORG, OTHER],
      )
      await owner.query(`INSERT INTO services (org_id, id, name) VALUES ($1, 'svc_1', 'Cut')`, [ORG])
    } finally {
      await owner.end()
    }
    role = await createTestRole('openbook_writer')
    writer = new pg.Client({ connectionString: database.url.replace('root@', `${role.name}@`) })
    await writer.connect()
  })

  afterAll(async () => {
    await writer?.end()
    await database?.drop()
    await role?.drop()
  })

  it('reads the organizations, their staff and their services', async () => {
    const orgs = await writer.query('SELECT id, name, plan FROM organizations ORDER BY id')
    expect(orgs.rows).toEqual([
      { id: ORG, name: 'W', plan: 'starter' },
      { id: OTHER, name: 'W2', plan: 'free' },
    ])
    const staff = await writer.query('SELECT org_id, id, name FROM staff ORDER BY org_id')
    expect(staff.rows).toHaveLength(2)
    const services = await writer.query('SELECT id FROM services WHERE org_id = $1', [ORG])
    expect(services.rows).toEqual([{ id: 'svc_1' }])
  })

  it('adds, renames, deactivates and deletes staff and services, and books against them', async () => {
    await writer.query(`INSERT INTO staff (org_id, id, name) VALUES ($1, 'stf_2', 'Cy')`, [ORG])
    await writer.query(`INSERT INTO services (org_id, id, name) VALUES ($1, 'svc_2', 'Colour')`, [ORG])
    await writer.query(`UPDATE staff SET name = 'Cyd' WHERE org_id = $1 AND id = 'stf_2'`, [ORG])
    await writer.query(`UPDATE services SET is_active = false WHERE org_id = $1 AND id = 'svc_1'`, [ORG])
    await writer.query(
      `INSERT INTO appointments (org_id, id, staff_id, service_id, start_at, end_at, status, is_active, created_at, updated_at)
       VALUES ($1, 'apt_1', 'stf_2', 'svc_2', '2025-06-01 10:00Z', '2025-06-01 11:00Z', 'scheduled', true, now(), now())`,
      [ORG],
    )
    // A staff member with bookings is kept by the foreign key; one without goes.
    await expect(writer.query(`DELETE FROM staff WHERE org_id = $1 AND id = 'stf_2'`, [ORG])).rejects.toThrow(
      /foreign key/,
    )
    await writer.query(`INSERT INTO staff (org_id, id) VALUES ($1, 'stf_3')`, [ORG])
    await writer.query(`DELETE FROM staff WHERE org_id = $1 AND id = 'stf_3'`, [ORG])
    await writer.query(`DELETE FROM services WHERE org_id = $1 AND id = 'svc_1'`, [ORG])
    const left = await writer.query('SELECT id FROM staff WHERE org_id = $1 ORDER BY id', [ORG])
    expect(left.rows).toEqual([{ id: 'stf_1' }, { id: 'stf_2' }])
    const store = createPostgresStore({ connectionString: database.url, maxConnections: 1 })
    try {
      expect(await bucketFaults(store)).toEqual([])
    } finally {
      await store.close()
    }
  })

  it.each([
    ['INSERT INTO organizations (id, name, plan) VALUES ($1, $1, $1)', ['org_new']],
    ["UPDATE organizations SET plan = 'enterprise' WHERE id = $1", [ORG]],
    ['DELETE FROM organizations WHERE id = $1', [OTHER]],
  ])('may not change an organization: %s', async (statement, params) => {
    await expect(writer.query(statement, params)).rejects.toThrow(/permission denied/)
  })

  it.each([
    'api_keys',
    'users',
    'memberships',
    'buckets',
    'list_changes',
    'list_folds',
    'list_definitions',
    'openbook_schema_migrations',
  ])('reads nothing of %s', async (table) => {
    await expect(writer.query(`SELECT 1 FROM ${table} LIMIT 1`)).rejects.toThrow(/permission denied/)
  })

  it('creates its own tables in a schema of its own, not in public', async () => {
    const owner = new pg.Client({ connectionString: database.url })
    await owner.connect()
    try {
      await owner.query(`CREATE SCHEMA salon AUTHORIZATION ${role.name}`)
    } finally {
      await owner.end()
    }
    await writer.query('CREATE TABLE salon.reminders (org_id text, appointment_id text, due_at timestamptz)')
    await writer.query(`INSERT INTO salon.reminders VALUES ($1, 'apt_1', now())`, [ORG])
    // PostgreSQL 15's default: no role but the owner creates in public.
    await expect(writer.query('CREATE TABLE public.reminders (org_id text)')).rejects.toThrow(
      /permission denied/,
    )
  })

  it.each([
    'SELECT * FROM list_fold_pending()',
    'SELECT list_fold_all()',
    "SELECT list_rebuild('customers')",
    "SELECT * FROM openbook_key_lookup('x')",
  ])('may not call %s', async (statement) => {
    await expect(writer.query(statement)).rejects.toThrow(/permission denied/)
  })
})
