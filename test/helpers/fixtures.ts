import type { KeyEnv } from '../../src/domain/api-key-secret.js'
import { createApiKey } from '../../src/domain/api-keys.js'
import type { Plan } from '../../src/domain/plans.js'
import { upsertRows } from '../../src/import/tables.js'
import { APPOINTMENT, CUSTOMER, columnOf, type ResourceDescription } from '../../src/schemas/descriptions.js'
import type { Store } from '../../src/store/types.js'

export const BRAND = 'svc'

export interface OrgFixture {
  readonly id: string
  readonly ownerEmail: string
}

/** An organization with an owner, an admin and a plain member. */
export async function createOrg(store: Store, id: string, plan: Plan = 'professional'): Promise<OrgFixture> {
  const ownerEmail = `owner@${id}.test`
  await store.admin(async (sql) => {
    await upsertRows(sql, 'organization', [{ id, name: `Org ${id}`, plan }])
    await upsertRows(sql, 'user', [
      { id: `usr_owner_${id}`, email: ownerEmail },
      { id: `usr_admin_${id}`, email: `admin@${id}.test` },
      { id: `usr_member_${id}`, email: `member@${id}.test` },
    ])
    await upsertRows(sql, 'membership', [
      { org_id: id, user_id: `usr_owner_${id}`, role: 'owner' },
      { org_id: id, user_id: `usr_admin_${id}`, role: 'admin' },
      { org_id: id, user_id: `usr_member_${id}`, role: 'member' },
    ])
  })
  return { id, ownerEmail }
}

export async function createKey(store: Store, org: OrgFixture, env: KeyEnv = 'test', expiresAt?: Date) {
  return store.admin((sql) =>
    createApiKey(sql, {
      orgId: org.id,
      actorEmail: org.ownerEmail,
      env,
      brand: BRAND,
      expiry: expiresAt && { at: expiresAt },
    }),
  )
}

export interface CustomerSeed {
  readonly id: string
  readonly createdAt: string
  readonly isActive?: boolean
  readonly [field: string]: unknown
}

/** Customers with API field names; fields not given stay empty. */
export async function addCustomers(
  store: Store,
  orgId: string,
  customers: readonly CustomerSeed[],
): Promise<void> {
  await store.admin((sql) =>
    upsertRows(
      sql,
      'customer',
      customers.map(({ id, createdAt, isActive, ...rest }) => ({
        org_id: orgId,
        id,
        is_active: isActive ?? true,
        created_at: createdAt,
        updated_at: createdAt,
        ...columns(CUSTOMER, rest),
      })),
    ),
  )
}

export interface AppointmentSeed {
  readonly id: string
  readonly start: string
  readonly status?: string
  readonly customerId?: string
  readonly staffId?: string
  readonly isActive?: boolean
  readonly [field: string]: unknown
}

export async function addStaff(store: Store, orgId: string, ids: readonly string[]): Promise<void> {
  await store.admin((sql) =>
    upsertRows(
      sql,
      'staff',
      ids.map((id) => ({ org_id: orgId, id, name: id, is_active: true })),
    ),
  )
}

export async function addAppointments(
  store: Store,
  orgId: string,
  appointments: readonly AppointmentSeed[],
): Promise<void> {
  await store.admin((sql) =>
    upsertRows(
      sql,
      'appointment',
      appointments.map(({ id, start, status, customerId, staffId, isActive, ...rest }) => ({
        org_id: orgId,
        id,
        start_at: start,
        end_at: new Date(Date.parse(start) + 30 * 60_000).toISOString(),
        status: status ?? 'scheduled',
        customer_id: customerId ?? null,
        staff_id: staffId ?? null,
        is_active: isActive ?? true,
        created_at: start,
        updated_at: start,
        ...columns(APPOINTMENT, rest),
      })),
    ),
  )
}

/** Fixture fields by the resource's description: a field it does not know fails the test's set-up. */
function columns(resource: ResourceDescription, record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(record).map(([field, value]) => [columnOf(resource, field), value]),
  )
}
