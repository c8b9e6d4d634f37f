import { describe, expect, it } from 'vitest'
import type { z } from 'zod'
import { RECORD_SCHEMAS } from '../../src/import/records.js'
import { APPOINTMENT, CUSTOMER, itemFields } from '../../src/schemas/descriptions.js'
import { checkOf, ruleOf } from '../../src/schemas/field-rules.js'
import { appointmentSchema, customerSchema } from '../../src/schemas/resources.js'

// A field type's rule (field-rules.ts) is written once; the import's record check and the API's
// item schema are made from it, and test/store/field-checks.test.ts holds the tables' CHECKs to
// the same values. Here the two checks in JavaScript meet every value the rule refuses and takes.

const NOW = '2025-06-01T10:00:00.000Z'
const RECORDS = {
  customer: { type: 'customer', id: 'cus_1', orgId: 'org_1', isActive: true, createdAt: NOW, updatedAt: NOW },
  appointment: {
    type: 'appointment',
    id: 'apt_1',
    orgId: 'org_1',
    start: NOW,
    end: '2025-06-01T11:00:00.000Z',
    status: 'scheduled',
    isActive: true,
    createdAt: NOW,
    updatedAt: NOW,
  },
}
const CASES = [
  ['customer', CUSTOMER, customerSchema],
  ['appointment', APPOINTMENT, appointmentSchema],
] as const

describe.each(CASES)('the %s rules', (name, resource, itemSchema) => {
  const shape = itemSchema.shape as Record<string, z.ZodTypeAny>
  it.each(resource.fields.map((field) => [field.field, field] as const))(
    '%s: the import and the item schema refuse what its rule refuses and take what it takes',
    (_field, field) => {
      const rule = ruleOf(field.type)
      const record = RECORDS[name]
      const item = itemFields(resource).includes(field) ? shape[field.field] : undefined
      // An appointment ends at or after its start: both ends take the value.
      const paired = name === 'appointment' && (field.field === 'start' || field.field === 'end')
      const withValue = (value: unknown) => ({
        ...record,
        ...(paired ? { start: value, end: value } : {}),
        [field.field]: value,
      })
      for (const value of rule.refused) {
        const parsed = RECORD_SCHEMAS[name].safeParse(withValue(value))
        expect(parsed.success, `the import took ${field.field} = ${JSON.stringify(value)}`).toBe(false)
        expect(parsed.error?.issues.map((issue) => issue.path.join('.'))).toContain(field.field)
        if (item)
          expect(item.safeParse(value).success, `the item schema took ${JSON.stringify(value)}`).toBe(false)
      }
      for (const value of rule.accepted) {
        const parsed = RECORD_SCHEMAS[name].safeParse(withValue(value))
        expect(
          parsed.error?.issues ?? [],
          `the import refused ${field.field} = ${JSON.stringify(value)}`,
        ).toEqual([])
        if (item)
          expect(item.safeParse(value).success, `the item schema refused ${JSON.stringify(value)}`).toBe(true)
      }
    },
  )
})

it("a text rule with a length or a pattern, a number's minimum and a date's span are CHECKs; a boolean needs none", () => {
  expect(checkOf('notes', 'text')).toBe('length(notes) <= 10000')
  expect(checkOf('staff_id', 'id')).toBe('length(staff_id) BETWEEN 1 AND 128')
  expect(checkOf('day_key', 'day')).toBe("day_key ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'")
  expect(checkOf('price_cents', 'cents')).toBe('price_cents >= 0')
  expect(checkOf('status', ['a', "o'b"])).toBe("status IN ('a', 'o''b')")
  expect(checkOf('start_at', 'timestamp')).toBe(
    "start_at BETWEEN '0001-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999999Z'",
  )
  expect(checkOf('date_of_birth', 'date')).toBe("date_of_birth BETWEEN '0001-01-01' AND '9999-12-31'")
  expect(checkOf('requires_payment', 'boolean')).toBeUndefined()
})
