import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { CURRENT_SCHEMA_PATH, dumpSchema } from '../../scripts/schema-dump.js'
import { createTestDatabase, postgresAvailable } from '../helpers/stores.js'

// src/store/schema/current.sql is the schema a reader opens instead of sixteen migrations: it must
// be what the migrations produce, function by function and grant by grant.
describe.skipIf(!postgresAvailable())('src/store/schema/current.sql', () => {
  it('is what the migrations produce (npm run docs writes it)', async () => {
    const database = await createTestDatabase({ migrated: true })
    try {
      const dumped = await dumpSchema(database.url)
      const committed = readFileSync(CURRENT_SCHEMA_PATH, 'utf8')
      // One line's difference is named, not a 2,000-line diff: run `npm run docs`.
      const first = committed.split('\n').findIndex((line, i) => line !== dumped.split('\n')[i])
      expect(
        first,
        `current.sql differs from the migrations from line ${first + 1}: run \`npm run docs\``,
      ).toBe(-1)
      expect(dumped).toBe(committed)
    } finally {
      await database.drop()
    }
  })
})
