import { describe, expect, it } from 'vitest'
import { pickOrganizations } from '../data.js'
import { CEILING, MESSAGE, PACED_LADDER, PGBENCH, pgbenchRun } from '../ladder.js'
import { captureStatements, parseListRequest } from '../sql.js'

// The key lookup as the service writes it (src/queries/api-keys.ts), so that the scripts follow it.
const firstPage = parseListRequest('/api/public/v1/customers?limit=50&offset=0')
if (!firstPage) throw new Error('the first page of customers is a list request')
const { authenticate } = await captureStatements(`svc_test_${'a'.repeat(64)}`, 'org_1', firstPage)
const statements = {
  authenticate,
  page: { text: 'SELECT $1::text, $2::bigint', params: ['org_1', 50] },
  count: { text: 'unused', params: [] },
}

describe('the ceiling (pgbench -M prepared)', () => {
  it('runs the key lookup and the page as two statements, the parameters as variables, as the reader with its settings', () => {
    const run = pgbenchRun(CEILING, statements, 'org_1')
    expect(run.protocol).toBe('prepared')
    expect(run.script).toBe(`${statements.authenticate.text};\nSELECT :p1::text, :p2::bigint;\n`)
    expect(run.variables).toEqual({ p1: 'org_1', p2: '50' })
    expect(run.sessionSettings).toMatchObject({
      role: 'openbook_reader',
      default_transaction_read_only: 'on',
      plan_cache_mode: 'force_generic_plan',
      'openbook.org_id': 'org_1',
    })
  })
})

describe("openbook's messages in pgbench", () => {
  const script = (name: string) => {
    const variant = PGBENCH.find((v) => v.name === name)
    if (!variant) throw new Error(name)
    return pgbenchRun(variant, statements, 'org_1').script
  }

  it('sends BEGIN, the settings, the key lookup and the page in one message, PREPAREd once per client, then COMMIT', () => {
    // The key lookup's text spans lines: pgbench ends a command at its unescaped semicolon.
    const [once = '', message] = script('pgb-openbook').split('\\endif\n')
    const lines = once.split('\n')
    expect(lines[0]).toBe('\\if :prepared = 0')
    expect(lines[1]).toMatch(/^PREPARE bench_page_[0-9a-f]{16} AS SELECT \$1::text, \$2::bigint;$/)
    expect(lines.slice(2)).toEqual(['\\set prepared 1', ''])
    expect(message).toMatch(
      /^BEGIN \\; SELECT concat\(set_config\('transaction_read_only', 'on', true\), [^;]* \\; SELECT set_config\('openbook.org_id', .* \\; EXECUTE bench_page_[0-9a-f]{16}\(current_setting\('openbook.org_id', true\), 50\);\nCOMMIT;\n$/s,
    )
  })

  it('prepares the settings and the key lookup too where openbook does, the hash a parameter', () => {
    const text = script('pgb-executes')
    expect(text).toContain('FROM openbook_key_lookup($1::text) a;')
    expect(text).toMatch(
      /BEGIN \\; EXECUTE bench_settings \\; EXECUTE bench_lookup\('[0-9a-f]{64}'\) \\; EXECUTE bench_page_/,
    )
  })

  it("sends openbook's message now (on, and pooler) as its own transaction: no BEGIN, no COMMIT", () => {
    for (const name of ['pgb-executes-implicit', 'pgb-pooler']) {
      const message = script(name).split('\\endif\n').at(-1) ?? ''
      expect(message, name).not.toMatch(/BEGIN|COMMIT/)
      expect(message, name).toMatch(
        /EXECUTE bench_page_[0-9a-f]{16}\(current_setting\('openbook.org_id', true\), 50\);\n$/,
      )
    }
    expect(script('pgb-executes-implicit')).toMatch(
      /^[\s\S]*\\endif\nEXECUTE bench_settings \\; EXECUTE bench_lookup/,
    )
    // The yardstick paces this one at openbook's rate beside the ceiling.
    expect(MESSAGE.name).toBe('pgb-executes-implicit')
  })

  it("takes openbook's message now apart: without the settings (per session), without the key lookup", () => {
    const message = (name: string) => script(name).split('\\endif\n').at(-1) ?? ''
    expect(message('pgb-implicit-no-settings')).toMatch(
      /^EXECUTE bench_lookup\('[0-9a-f]{64}'\) \\; EXECUTE bench_page_/,
    )
    const noSettings = PGBENCH.find((v) => v.name === 'pgb-implicit-no-settings')
    if (!noSettings) throw new Error('pgb-implicit-no-settings')
    expect(pgbenchRun(noSettings, statements, 'org_1').sessionSettings).toMatchObject({
      role: 'openbook_reader',
    })
    expect(message('pgb-implicit-no-lookup')).toMatch(
      /^EXECUTE bench_settings \\; SELECT set_config\('openbook.org_id', 'org_1', true\) \\; EXECUTE bench_page_/,
    )
    expect(PACED_LADDER.map((v) => v.name)).toEqual([
      'pgb-prepared',
      'pgb-executes-implicit',
      'pgb-implicit-no-settings',
      'pgb-implicit-no-lookup',
      'pgb-bare',
    ])
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
