import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { APPOINTMENT, CUSTOMER } from '../../src/schemas/descriptions.js'
import { checkOf, ruleOf } from '../../src/schemas/field-rules.js'
import { ROOT } from '../helpers/process.js'

// docs/writers.md tells the salon software's developer each column's rule. Every described field
// the table holds to a CHECK (field-rules.ts) must be named in a row of that table whose rule says
// the rule's words: a field added with a rule, or a rule changed, fails here until the page says it.

const page = readFileSync(join(ROOT, 'docs', 'writers.md'), 'utf8')
const section = page.slice(page.indexOf('## The columns you own, and their rules'))
const table = section.slice(0, section.indexOf('\n## '))

/** The table's rows: the columns each names (`table.column`, then bare ones of that table), and its rule. */
const rows = table
  .split('\n')
  .filter((line) => line.startsWith('| `'))
  .map((line) => {
    const [names = '', rule = ''] = line.slice(1, -1).split(' | ')
    const columns = new Set<string>()
    let owner: string | undefined
    for (const [, name = ''] of names.matchAll(/`([a-z0-9_.]+)`/g)) {
      const [first, second] = name.split('.')
      if (second !== undefined) owner = first
      const column = second ?? first ?? ''
      for (const t of owner ? [owner] : ['customers', 'appointments']) columns.add(`${t}.${column}`)
    }
    return { columns, rule }
  })

it('docs/writers.md has its column table', () => {
  expect(rows.length).toBeGreaterThan(10)
})

it.each(
  [CUSTOMER, APPOINTMENT].flatMap((resource) =>
    resource.fields
      .filter((field) => checkOf(field.column, field.type) !== undefined)
      .map((field) => [`${resource.table}.${field.column}`, field] as const),
  ),
)("docs/writers.md says %s's rule", (column, field) => {
  const words = ruleOf(field.type).words
  const named = rows.filter((row) => row.columns.has(column))
  expect(named.length, `no row of docs/writers.md's column table names ${column}`).toBeGreaterThan(0)
  expect(
    named.some((row) => row.rule.includes(words)),
    `docs/writers.md's row of ${column} does not say "${words}"`,
  ).toBe(true)
})
