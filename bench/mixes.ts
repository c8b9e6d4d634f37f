import type { AppointmentFilters } from '../src/queries/appointments.js'
import { APPOINTMENT_LIST } from '../src/schemas/filters.js'
import type { ListRequest, Resource } from './sql.js'

export type OrgSize = 'small' | 'medium' | 'large'

export interface BenchOrg {
  readonly size: OrgSize
  readonly id: string
  readonly plan: string
  /** Active rows, as `orgs list` counts them. */
  readonly customers: number
  readonly appointments: number
  readonly key: string
}

export type PagePosition = 'first' | 'middle' | 'last'

export interface MixSpec {
  readonly id: string
  readonly resource: Resource
  readonly size: OrgSize
  readonly position: PagePosition
  readonly filters: (context: MixContext) => AppointmentFilters
  readonly filterLabel: string
}

export interface MixContext {
  /** The largest organization's busiest value of each value filter, by parameter (`busiestValues`). */
  readonly busiest: Readonly<Record<string, string>>
  readonly now: Date
}

export interface Mix {
  readonly id: string
  readonly label: string
  readonly org: BenchOrg
  readonly position: PagePosition
  readonly request: ListRequest
  /** Path and query string of the HTTP request. */
  readonly path: string
}

export const PAGE_SIZE = 50
const DAY = 86_400_000
const none = () => ({})
const daysAgo = (context: MixContext, days: number) =>
  new Date(context.now.getTime() - days * DAY).toISOString()

const POSITIONS: readonly PagePosition[] = ['first', 'middle', 'last']

const VALUE_FILTERS = APPOINTMENT_LIST.filters.filter((filter) => filter.compare === 'equals')
const FROM = APPOINTMENT_LIST.filters.find((filter) => filter.compare === 'from')
const TO = APPOINTMENT_LIST.filters.find((filter) => filter.compare === 'to')

/** A range of start times, `from` to `to` days ago, in the bound filters' parameters. */
const range = (context: MixContext, from: number, to: number): AppointmentFilters => ({
  ...(FROM ? { [FROM.param]: daysAgo(context, from) } : {}),
  ...(TO ? { [TO.param]: daysAgo(context, to) } : {}),
})
const RANGE_LABEL = [FROM?.param, TO?.param].filter(Boolean).join('+')

/** A filter's part of a mix's id: `staffId` → `staff`. */
const shortName = (param: string) => param.replace(/Id$/, '').toLowerCase()

/** A value filter at the largest organization's busiest value. */
const busiest = (param: string) => (context: MixContext) => ({ [param]: context.busiest[param] ?? '' })

/**
 * The filters of the largest organization's appointment mixes, from the filter descriptions: none,
 * each value filter at its busiest value, the bounds, and each many-rows value filter with them;
 * each at its first, middle and last page.
 */
const LARGE_FILTERS: readonly {
  readonly name: string
  readonly label: string
  readonly filters: (context: MixContext) => AppointmentFilters
}[] = [
  { name: '', label: '', filters: none },
  ...VALUE_FILTERS.map((filter) => ({
    name: shortName(filter.param),
    label: filter.param,
    filters: busiest(filter.param),
  })),
  { name: 'dates', label: RANGE_LABEL, filters: (c) => range(c, 120, 30) },
  ...VALUE_FILTERS.filter((filter) => filter.rows === 'many').map((filter) => ({
    name: `${shortName(filter.param)}-dates`,
    label: `${filter.param}+dates`,
    filters: (c: MixContext) => ({ ...busiest(filter.param)(c), ...range(c, 365, 1) }),
  })),
]

/**
 * The mixes: the small and medium organizations' four (what most requests look like), then the
 * largest organization's every page (first, middle, last) of customers and of appointments with
 * each filter.
 */
export const SPECS: readonly MixSpec[] = [
  {
    id: 'cus-s-first',
    resource: 'customers',
    size: 'small',
    position: 'first',
    filters: none,
    filterLabel: '',
  },
  {
    id: 'cus-m-middle',
    resource: 'customers',
    size: 'medium',
    position: 'middle',
    filters: none,
    filterLabel: '',
  },
  {
    id: 'apt-s-status',
    resource: 'appointments',
    size: 'small',
    position: 'first',
    filters: () => ({ status: 'completed' }),
    filterLabel: 'status',
  },
  {
    id: 'apt-m-dates',
    resource: 'appointments',
    size: 'medium',
    position: 'first',
    filters: (c) => range(c, 120, 30),
    filterLabel: RANGE_LABEL,
  },
  ...POSITIONS.map(
    (position): MixSpec => ({
      id: `cus-l-${position}`,
      resource: 'customers',
      size: 'large',
      position,
      filters: none,
      filterLabel: '',
    }),
  ),
  ...LARGE_FILTERS.flatMap((filter) =>
    POSITIONS.map(
      (position): MixSpec => ({
        id: `apt-l-${filter.name ? `${filter.name}-` : ''}${position}`,
        resource: 'appointments',
        size: 'large',
        position,
        filters: filter.filters,
        filterLabel: filter.label,
      }),
    ),
  ),
]

export function offsetFor(position: PagePosition, total: number): number {
  if (position === 'first' || total === 0) return 0
  const lastPage = Math.floor((total - 1) / PAGE_SIZE)
  return (position === 'last' ? lastPage : Math.floor(lastPage / 2)) * PAGE_SIZE
}

export function pathOf(request: ListRequest): string {
  const query = new URLSearchParams({
    limit: String(request.page.limit),
    offset: String(request.page.offset),
  })
  for (const [name, value] of Object.entries(request.filters)) {
    if (value !== undefined) query.set(name, String(value))
  }
  return `/api/public/v1/${request.resource}?${query}`
}

/**
 * The mixes of this data set. `countOf` gives the total a request's filter matches,
 * which places the middle and last pages. A page that another mix already asks for (a filter
 * with one page only: its middle and last are its first) is left out.
 */
export async function buildMixes(
  orgs: Readonly<Record<OrgSize, BenchOrg>>,
  context: MixContext,
  countOf: (orgId: string, request: ListRequest) => Promise<number>,
  only?: string,
  specs: readonly MixSpec[] = SPECS,
): Promise<Mix[]> {
  const mixes: Mix[] = []
  for (const spec of specs) {
    if (only && !only.split(',').some((part) => spec.id.includes(part))) continue
    const org = orgs[spec.size]
    const filters = spec.filters(context)
    const probe: ListRequest = { resource: spec.resource, page: { limit: PAGE_SIZE, offset: 0 }, filters }
    const total = spec.position === 'first' ? 0 : await countOf(org.id, probe)
    const request: ListRequest = {
      ...probe,
      page: { limit: PAGE_SIZE, offset: offsetFor(spec.position, total) },
    }
    const filter = spec.filterLabel ? `, ${spec.filterLabel}` : ''
    const path = pathOf(request)
    if (mixes.some((mix) => mix.org === org && mix.path === path)) continue
    mixes.push({
      id: spec.id,
      label: `${spec.resource} · ${spec.size} · ${spec.position}${filter}`,
      org,
      position: spec.position,
      request,
      path,
    })
  }
  return mixes
}

/** A page of the embedded store's mixes: path and query string, and what it asks for. */
export interface EmbeddedPage {
  readonly id: string
  readonly label: string
  readonly path: string
}

/**
 * The pages of a data shape's crowded organization on the embedded store (bench/data.ts puts the
 * crowd into the demo organization there): customers, appointments, a status and the date range of
 * the `dates` mixes (which holds the crowd's instant), each at its first, middle and last page.
 * `totalOf` gives a request's exact total.
 */
export async function crowdPages(
  now: Date,
  totalOf: (request: ListRequest) => Promise<number>,
): Promise<EmbeddedPage[]> {
  const context: MixContext = { busiest: {}, now }
  const lists: readonly { id: string; resource: Resource; label: string; filters: AppointmentFilters }[] = [
    { id: 'cus', resource: 'customers', label: '', filters: {} },
    { id: 'apt', resource: 'appointments', label: '', filters: {} },
    { id: 'apt-status', resource: 'appointments', label: ', status', filters: { status: 'completed' } },
    {
      id: 'apt-dates',
      resource: 'appointments',
      label: ', startDate+endDate',
      filters: range(context, 120, 30),
    },
  ]
  const pages: EmbeddedPage[] = []
  for (const list of lists) {
    const probe: ListRequest = {
      resource: list.resource,
      page: { limit: PAGE_SIZE, offset: 0 },
      filters: list.filters,
    }
    const total = await totalOf(probe)
    for (const position of POSITIONS) {
      const request = { ...probe, page: { limit: PAGE_SIZE, offset: offsetFor(position, total) } }
      pages.push({
        id: `emb-crowd-${list.id}-${position}`,
        label: `${list.resource} · crowd · ${position}${list.label}`,
        path: pathOf(request),
      })
    }
  }
  return pages
}
