import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { environmentSchema } from '../../src/config.js'
import { ROOT } from '../helpers/process.js'

/** configuration.md lists every variable the server reads, in one of its tables, with its default. */
describe('docs/operators/configuration.md', () => {
  const page = readFileSync(join(ROOT, 'docs', 'operators', 'configuration.md'), 'utf8')
  const rows = new Map(
    [...page.matchAll(/^\| `([A-Z_]+)` +\| ([^|]+?) +\|/gm)].map((m) => [m[1] ?? '', (m[2] ?? '').trim()]),
  )

  it.each(Object.keys(environmentSchema.shape))('has a row for %s', (name) => {
    expect(rows.has(name), `configuration.md has no table row for ${name}`).toBe(true)
  })

  it('gives each default as the schema has it', () => {
    const defaults = environmentSchema.parse({}) as Record<string, unknown>
    for (const [name, value] of Object.entries(defaults)) {
      if (value === undefined) continue
      expect(rows.get(name), name).toBe(`\`${String(value)}\``)
    }
  })
})
