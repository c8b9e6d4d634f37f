/** NDJSON lines for import tests: two organizations with people, staff, services and bookings. */
export type Line = Record<string, unknown>

const at = (day: number, hour = 9) => new Date(Date.UTC(2025, 0, day, hour)).toISOString()

export function organizationLines(orgId: string, ownerEmail: string): Line[] {
  const userId = `usr_${orgId}`
  return [
    { type: 'organization', id: orgId, name: `Studio ${orgId}`, plan: 'enterprise', createdAt: at(1) },
    { type: 'user', id: userId, email: ownerEmail, name: 'Owner' },
    { type: 'membership', orgId, userId, role: 'owner' },
    { type: 'staff', id: `stf_${orgId}`, orgId, name: 'Mara' },
    { type: 'service', id: `svc_${orgId}`, orgId, name: 'Cut' },
    ...[1, 2, 3].map((n) => ({
      type: 'customer',
      id: `cus_${orgId}_${n}`,
      orgId,
      firstName: `Canary${n}`,
      email: `c${n}@${orgId}.test`,
      preferredStaffId: `stf_${orgId}`,
      isActive: n !== 3,
      createdAt: at(n),
      updatedAt: at(n),
    })),
    ...[1, 2].map((n) => ({
      type: 'appointment',
      id: `apt_${orgId}_${n}`,
      orgId,
      customerId: `cus_${orgId}_${n}`,
      staffId: `stf_${orgId}`,
      serviceId: `svc_${orgId}`,
      start: at(10 + n, 10),
      end: at(10 + n, 11),
      status: 'completed',
      priceCents: 4_500,
      currency: 'EUR',
      isActive: true,
      createdAt: at(5),
      updatedAt: at(5),
    })),
  ]
}

export const ndjson = (lines: readonly Line[]): string =>
  `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`
