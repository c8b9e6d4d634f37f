import type { ServerProcess } from './server.js'

/** Organizations with customers and appointments, for the openbook-sync end-to-end tests. */

/** Ids that every salon uses (ids are unique per organization only). */
export const SHARED = 25

export interface Salon {
  readonly org: string
  readonly customers: number
  readonly appointments: number
  key: string
}

export const customerId = (salon: Salon, n: number) =>
  n < SHARED ? `cus_shared_${n}` : `cus_${salon.org}_${n}`
export const appointmentId = (salon: Salon, n: number) =>
  n < SHARED ? `apt_shared_${n}` : `apt_${salon.org}_${n}`

export function customerLine(salon: Salon, n: number, active = true): object {
  // Some customers share a creation time (ties in the list's order).
  const createdAt = new Date(Date.UTC(2025, 0, 1) + Math.floor(n / 3) * 3_600_000).toISOString()
  return {
    type: 'customer',
    id: customerId(salon, n),
    orgId: salon.org,
    firstName: `F${n}`,
    lastName: salon.org.slice(-1).toUpperCase(),
    displayName: `${salon.org} customer ${n}`,
    isActive: active,
    createdAt,
    updatedAt: createdAt,
  }
}

export function appointmentLine(salon: Salon, n: number): object {
  const start = new Date(Date.UTC(2026, 0, 1) + n * 5_400_000).toISOString()
  return {
    type: 'appointment',
    id: appointmentId(salon, n),
    orgId: salon.org,
    customerId: customerId(salon, n % salon.customers),
    start,
    end: new Date(Date.parse(start) + 3_600_000).toISOString(),
    status: 'confirmed',
    priceCents: 1000 + n,
    currency: 'EUR',
    isActive: true,
    createdAt: '2025-12-01T00:00:00.000Z',
    updatedAt: '2025-12-01T00:00:00.000Z',
  }
}

/** The salon's organization, owner, rows and test key, through the operator CLI. */
export async function setUpSalon(server: ServerProcess, salon: Salon): Promise<string> {
  const owner = `owner@${salon.org.replaceAll('_', '-')}.test`
  await server.importLines([
    { type: 'organization', id: salon.org, name: salon.org, plan: 'enterprise' },
    { type: 'user', id: `usr_${salon.org}`, email: owner },
    { type: 'membership', orgId: salon.org, userId: `usr_${salon.org}`, role: 'owner' },
    ...Array.from({ length: salon.customers }, (_, n) => customerLine(salon, n)),
    ...Array.from({ length: salon.appointments }, (_, n) => appointmentLine(salon, n)),
  ])
  const out = await server.cli([
    'keys',
    'create',
    '--org',
    salon.org,
    '--as',
    owner,
    '--env',
    'test',
    '--json',
  ])
  const created = JSON.parse(out) as { id: string; key: string }
  salon.key = created.key
  return created.id
}
