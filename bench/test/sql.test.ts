import { describe, expect, it } from 'vitest'
import { pickOrganizations } from '../data.js'
import { inline, OPEN_TRANSACTION, parseListRequest, pgbenchScript } from '../sql.js'

describe('inline', () => {
  it('writes parameters in as literals, quotes doubled', () => {
    expect(inline({ text: 'SELECT $1, $2, $10', params: ["o'k", 5, 3, 4, 5, 6, 7, 8, 9, 'ten'] })).toBe(
      "SELECT 'o''k', 5, 'ten'",
    )
  })

  it('refuses a value it cannot write safely', () => {
    expect(() => inline({ text: 'SELECT $1', params: [1.5] })).toThrow(/no literal/)
    expect(() => inline({ text: 'SELECT $1', params: [null] })).toThrow(/no literal/)
  })
})

describe('pgbenchScript', () => {
  it('sends BEGIN and its settings with the key lookup, then the page, then COMMIT', () => {
    const script = pgbenchScript({
      authenticate: { text: 'SELECT 1 AS key', params: [] },
      page: { text: 'SELECT $1::text', params: ['org_1'] },
      count: { text: 'unused', params: [] },
    })
    const lines = script.split('\n')
    expect(lines).toHaveLength(4)
    expect(lines[0]).toMatch(
      /^BEGIN \\; SELECT set_config\('transaction_read_only', 'on', true\), .* \\; SELECT 1 AS key;$/,
    )
    expect(lines.slice(1)).toEqual(["SELECT 'org_1'::text;", 'COMMIT;', ''])
    expect(OPEN_TRANSACTION.startsWith('BEGIN; ')).toBe(true)
  })
})

describe('pickOrganizations', () => {
  const org = (id: string, customers: number, plan = 'enterprise') => ({
    id,
    plan,
    customers,
    appointments: 0,
  })

  it('takes the largest, the one nearest the median and the one nearest ten times it, with API access', () => {
    const listed = [
      org('tiny', 10),
      org('a', 100),
      org('b', 110),
      org('c', 120),
      org('d', 1_000),
      org('e', 1_300),
      org('big', 50_000),
      org('free-giant', 90_000, 'free'),
    ]
    expect(pickOrganizations(listed)).toMatchObject({
      large: { id: 'big' },
      medium: { id: 'e' },
      small: { id: 'd' },
    })
  })

  it('needs three organizations with API access', () => {
    expect(() => pickOrganizations([org('a', 10), org('b', 20, 'free')])).toThrow(/three organizations/)
  })
})

describe('parseListRequest', () => {
  it('reads the list, the page and the filters the URL names', () => {
    expect(parseListRequest('/api/public/v1/customers')).toEqual({
      resource: 'customers',
      page: { limit: 50, offset: 0 },
      filters: {},
    })
    expect(
      parseListRequest(
        '/api/public/v1/appointments?status=completed&startDate=2026-01-01T00:00:00Z&limit=20&offset=40&other=1',
      ),
    ).toEqual({
      resource: 'appointments',
      page: { limit: 20, offset: 40 },
      filters: { status: 'completed', startDate: '2026-01-01T00:00:00Z' },
    })
  })

  it('refuses another path and a page out of bounds', () => {
    expect(parseListRequest('/api/public/v1/staff')).toBeUndefined()
    expect(parseListRequest('/openapi.json')).toBeUndefined()
    expect(parseListRequest('/api/public/v1/customers?limit=101')).toBeUndefined()
    expect(parseListRequest('/api/public/v1/customers?limit=0')).toBeUndefined()
    expect(parseListRequest('/api/public/v1/customers?offset=-1')).toBeUndefined()
    expect(parseListRequest('/api/public/v1/customers?offset=1.5')).toBeUndefined()
  })
})
