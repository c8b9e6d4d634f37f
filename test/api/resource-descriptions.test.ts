import { expect, it } from 'vitest'
import type { z } from 'zod'
import { TABLES } from '../../src/import/tables.js'
import {
  APPOINTMENT,
  CUSTOMER,
  columnsOf,
  itemFields,
  nullInItem,
  type ResourceDescription,
} from '../../src/schemas/descriptions.js'
import { appointmentSchema, customerSchema } from '../../src/schemas/resources.js'
import { describeEachStore } from '../helpers/stores.js'

// Each resource is described once (src/schemas/descriptions.ts); the API's item schema, the query's
// fields, the bulk loader's columns and the import's records are derived from it. Here the
// derivations are checked, and the migrated tables, which are not derived, are held to it.
const RESOURCES: readonly [string, ResourceDescription, z.AnyZodObject][] = [
  ['customer', CUSTOMER, customerSchema],
  ['appointment', APPOINTMENT, appointmentSchema],
]

it.each(RESOURCES)(
  'the %s schema of the API has the description item fields, in its order',
  (_name, resource, schema) => {
    expect(Object.keys(schema.shape)).toEqual(itemFields(resource).map((field) => field.field))
  },
)

it.each(RESOURCES)(
  'the %s schema of the API is nullable exactly where an item writes null',
  (_name, resource, schema) => {
    const nullable = Object.entries(schema.shape as Record<string, z.ZodTypeAny>)
      .filter(([, field]) => field.isNullable())
      .map(([key]) => key)
    expect(new Set(nullable)).toEqual(nullInItem(resource))
  },
)

it.each(RESOURCES)('the bulk loader copies every %s column, the key first', (name, resource) => {
  expect(TABLES[name as 'customer' | 'appointment']).toMatchObject({
    table: resource.table,
    key: resource.key,
    columns: columnsOf(resource),
  })
})

describeEachStore('the migrated tables match the descriptions on %s', (testStore) => {
  it.each(RESOURCES)(
    '%s: every column, and NOT NULL exactly where the import requires the field',
    async (_name, resource) => {
      const columns = await testStore.store.admin((sql) =>
        sql.query<{ column: string; required: boolean }>(
          `SELECT column_name AS column, is_nullable = 'NO' AS required FROM information_schema.columns
         WHERE table_schema = 'public' AND table_name = $1 ORDER BY column_name`,
          [resource.table],
        ),
      )
      const described = resource.fields
        .map((field) => ({ column: field.column, required: field.required === true }))
        .sort((a, b) => (a.column < b.column ? -1 : 1))
      expect(columns).toEqual(described)
    },
  )
})
