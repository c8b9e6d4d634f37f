import { describe, expect, it } from 'vitest'
import { APPOINTMENT_FILTERS } from '../../src/queries/appointments.js'
import { type BenchOrg, buildMixes, offsetFor, PAGE_SIZE, pathOf, SPECS } from '../mixes.js'

const org = (size: BenchOrg['size'], id: string): BenchOrg => ({
  size,
  id,
  plan: 'enterprise',
  customers: 0,
  appointments: 0,
  key: `svc_test_${id}`,
})
const orgs = { small: org('small', 's'), medium: org('medium', 'm'), large: org('large', 'l') }
const context = {
  busiest: { status: 'completed', customerId: 'cus_1', staffId: 'stf_1' },
  now: new Date('2026-11-23T00:00:00.000Z'),
}

describe('offsetFor', () => {
  it('places the first, middle and last page on page boundaries', () => {
    expect(offsetFor('first', 1000)).toBe(0)
    expect(offsetFor('last', 1000)).toBe(950)
    expect(offsetFor('middle', 1000)).toBe(450)
    expect(offsetFor('last', 1001)).toBe(1000)
  })

  it('puts every page of a one-page or empty total at offset 0', () => {
    for (const total of [0, 1, PAGE_SIZE]) {
      expect(offsetFor('middle', total)).toBe(0)
      expect(offsetFor('last', total)).toBe(0)
    }
  })
})

describe('pathOf', () => {
  it('writes the page, then the filters that are set, URL-encoded', () => {
    const path = pathOf({
      resource: 'appointments',
      page: { limit: 50, offset: 100 },
      filters: { status: 'completed', startDate: '2026-01-01T00:00:00.000Z', customerId: undefined },
    })
    expect(path).toBe(
      '/api/public/v1/appointments?limit=50&offset=100&status=completed&startDate=2026-01-01T00%3A00%3A00.000Z',
    )
  })
})

describe('the mixes', () => {
  it('cover the largest organization at its first, middle and last page for every filter', () => {
    const large = SPECS.filter((spec) => spec.size === 'large')
    const byFilter = new Map<string, Set<string>>()
    for (const spec of large) {
      const key = `${spec.resource}:${spec.filterLabel}`
      byFilter.set(key, (byFilter.get(key) ?? new Set()).add(spec.position))
    }
    // The mixes of today's filters; a filter described later adds its own (checked below).
    expect([...byFilter.keys()]).toEqual(
      expect.arrayContaining([
        'appointments:',
        'appointments:customerId',
        'appointments:staffId',
        'appointments:staffId+dates',
        'appointments:startDate+endDate',
        'appointments:status',
        'appointments:status+dates',
        'customers:',
      ]),
    )
    for (const positions of byFilter.values())
      expect([...positions].sort()).toEqual(['first', 'last', 'middle'])
    // Every described filter is in a mix: a new one joins them without an edit here.
    const labels = large.map((spec) => spec.filterLabel).join('+')
    for (const name of APPOINTMENT_FILTERS) expect(labels.split('+')).toContain(name)
  })

  it('have unique ids, and small and medium organizations keep their four', () => {
    expect(new Set(SPECS.map((spec) => spec.id)).size).toBe(SPECS.length)
    expect(SPECS.filter((spec) => spec.size !== 'large').map((spec) => spec.id)).toEqual([
      'cus-s-first',
      'cus-m-middle',
      'apt-s-status',
      'apt-m-dates',
    ])
  })

  it('place pages from the count of the filtered rows and leave out a page asked for already', async () => {
    const counted: string[] = []
    const mixes = await buildMixes(orgs, context, async (orgId, request) => {
      counted.push(`${orgId}:${Object.keys(request.filters).join('+')}`)
      // The busy customer has one page of appointments: its middle and last page are its first.
      return request.filters.customerId ? 10 : 1000
    })
    const ids = mixes.map((mix) => mix.id)
    expect(ids).toContain('apt-l-customer-first')
    expect(ids).not.toContain('apt-l-customer-middle')
    expect(ids).not.toContain('apt-l-customer-last')
    expect(mixes.find((mix) => mix.id === 'apt-l-status-last')?.request.page.offset).toBe(950)
    expect(mixes.find((mix) => mix.id === 'cus-m-middle')?.org.id).toBe('m')
    expect(counted).not.toContain('s:status') // first pages need no count
    expect(new Set(mixes.map((mix) => `${mix.org.id}${mix.path}`)).size).toBe(mixes.length)
  })

  it('keep only the mixes whose id contains --only', async () => {
    const mixes = await buildMixes(orgs, context, async () => 1000, 'cus-l')
    expect(mixes.map((mix) => mix.id)).toEqual(['cus-l-first', 'cus-l-middle', 'cus-l-last'])
    const smallAndMedium = await buildMixes(orgs, context, async () => 1000, '-s-,-m-')
    expect(smallAndMedium.map((mix) => mix.id)).toEqual([
      'cus-s-first',
      'cus-m-middle',
      'apt-s-status',
      'apt-m-dates',
    ])
  })
})
