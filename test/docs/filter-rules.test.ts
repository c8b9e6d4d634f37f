// The rules openbook decides for each filter's value where the contract is silent are written by
// hand for integrators: in paging.md's parameters and in the decisions table. A filter added to
// the descriptions without them fails here.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { APPOINTMENT_LIST, filterValues } from '../../src/schemas/filters.js'
import { ROOT } from '../helpers/process.js'

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8')
/** A section of a Markdown page, from its heading to the next of the same level. */
const section = (page: string, heading: string) => {
  const start = page.indexOf(`\n${heading}\n`)
  if (start < 0) throw new Error(`no "${heading}"`)
  const level = heading.split(' ')[0]
  const end = page.indexOf(`\n${level} `, start + heading.length + 2)
  return page.slice(start, end < 0 ? undefined : end)
}

/** The filters whose value's form openbook decides: ids and date-times (an enumeration's values are the contract's). */
const decided = APPOINTMENT_LIST.filters.filter(
  (filter) => filter.compare !== 'equals' || !filterValues(APPOINTMENT_LIST, filter),
)

describe("the filters' rules for integrators", () => {
  it('the filters checked are the ids and the date-times of the descriptions', () => {
    expect(decided.map((filter) => filter.param)).toEqual(
      expect.arrayContaining(['customerId', 'staffId', 'startDate', 'endDate']),
    )
  })

  it.each(decided.map((filter) => filter.param))(
    "%s's rule is in paging.md's parameters and in the decisions table",
    (param) => {
      const parameters = section(read('docs/integrators/paging.md'), '## Parameters')
      expect(parameters, `docs/integrators/paging.md#parameters names \`${param}\``).toContain(`\`${param}\``)
      const table = read('docs/design/decisions.md')
        .split('\n')
        .filter((line) => line.startsWith('|') && line.includes('paging.md#parameters'))
      expect(
        table.some((line) => line.split('|')[1]?.includes(`\`${param}\``)),
        `a row of docs/design/decisions.md that links paging.md#parameters names \`${param}\``,
      ).toBe(true)
    },
  )
})
