import { describe, expect, it } from 'vitest'
import { RECORD_SCHEMAS, utcDay } from '../../src/import/records.js'

/** The import's record validation on its own: no store, no file. */
const appointment = {
  type: 'appointment',
  id: 'apt_1',
  orgId: 'org_a',
  start: '2025-03-01T23:30:00-02:00',
  end: '2025-03-02T00:30:00-02:00',
  status: 'completed',
  isActive: true,
  createdAt: '2025-02-01T00:00:00Z',
  updatedAt: '2025-02-01T00:00:00Z',
}

const issues = (result: {
  success: boolean
  error?: { issues: { path: PropertyKey[]; message: string }[] }
}) => result.error?.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`) ?? []

describe('import records', () => {
  it('the UTC day of a date-time with an offset', () => {
    expect(utcDay('2025-03-01T23:30:00-02:00')).toBe('2025-03-02')
    expect(utcDay('2025-03-02T00:30:00+02:00')).toBe('2025-03-01')
    expect(utcDay('2025-03-01T00:00:00Z')).toBe('2025-03-01')
  })

  it('an appointment: dayKey derived from start when absent, refused when it is another day', () => {
    const parsed = RECORD_SCHEMAS.appointment.safeParse(appointment)
    expect(parsed.success, issues(parsed).join('\n')).toBe(true)
    expect(parsed.data).toMatchObject({ dayKey: '2025-03-02' })
    expect(RECORD_SCHEMAS.appointment.safeParse({ ...appointment, dayKey: '2025-03-02' }).success).toBe(true)
    expect(issues(RECORD_SCHEMAS.appointment.safeParse({ ...appointment, dayKey: '2025-03-01' }))).toEqual([
      'dayKey: must be the UTC day of start (2025-03-02)',
    ])
  })

  it('an appointment that ends before it starts is refused at its end', () => {
    expect(
      issues(RECORD_SCHEMAS.appointment.safeParse({ ...appointment, end: '2025-03-01T23:00:00-02:00' })),
    ).toEqual(['end: must not be before start'])
  })

  it('unknown fields are an error, so that a typo never drops data silently', () => {
    const result = RECORD_SCHEMAS.customer.safeParse({
      type: 'customer',
      id: 'cus_1',
      orgId: 'org_a',
      isActive: true,
      createdAt: '2025-01-01T00:00:00Z',
      updatedAt: '2025-01-01T00:00:00Z',
      fristName: 'Ann',
    })
    expect(result.success).toBe(false)
    expect(issues(result).join('\n')).toMatch(/fristName/)
  })

  it('organizations, users and memberships: plans, e-mail addresses and roles are checked', () => {
    expect(
      RECORD_SCHEMAS.organization.safeParse({ type: 'organization', id: 'o', name: 'O', plan: 'free' })
        .success,
    ).toBe(true)
    expect(
      RECORD_SCHEMAS.organization.safeParse({ type: 'organization', id: 'o', name: 'O', plan: 'gold' })
        .success,
    ).toBe(false)
    expect(
      RECORD_SCHEMAS.organization.safeParse({ type: 'organization', id: '', name: 'O', plan: 'free' })
        .success,
    ).toBe(false)
    expect(RECORD_SCHEMAS.user.safeParse({ type: 'user', id: 'u', email: 'not an address' }).success).toBe(
      false,
    )
    expect(
      RECORD_SCHEMAS.membership.safeParse({ type: 'membership', orgId: 'o', userId: 'u', role: 'owner' })
        .success,
    ).toBe(true)
    expect(
      RECORD_SCHEMAS.membership.safeParse({ type: 'membership', orgId: 'o', userId: 'u', role: 'king' })
        .success,
    ).toBe(false)
  })

  it('ids are 1 to 128 characters; money is whole non-negative cents', () => {
    expect(RECORD_SCHEMAS.staff.safeParse({ type: 'staff', id: 'x'.repeat(129), orgId: 'o' }).success).toBe(
      false,
    )
    for (const priceCents of [-1, 1.5, 2_147_483_648]) {
      expect(
        RECORD_SCHEMAS.appointment.safeParse({ ...appointment, priceCents }).success,
        String(priceCents),
      ).toBe(false)
    }
    expect(RECORD_SCHEMAS.appointment.safeParse({ ...appointment, priceCents: 0 }).success).toBe(true)
  })
})
