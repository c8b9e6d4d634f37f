import { Random } from './random.js'
import { CITIES, CONTACT, CURRENCY, FIRST, GENDERS, LAST, PLANS, SERVICES } from './vocabulary.js'

/** Rows are produced in the stores' own column names (snake_case), ready for upsertRows. */
export type Row = Record<string, string | number | boolean | null>

export interface SyntheticPlan {
  readonly orgs: number
  readonly customers: number
  readonly appointments: number
  readonly seed: number
  /** The moment "now" for statuses and spreads (default: the start of the current UTC day). */
  readonly now?: Date
}

const DAY = 86_400_000

/**
 * Skewed sizes: two giants take 68% of all rows, ten large organizations 12%,
 * the many small ones share the rest. Fewer organizations: the same tiers, cut short.
 */
export function organizationShares(orgs: number, random: Random): number[] {
  const giants = Math.min(2, orgs)
  const large = Math.min(10, orgs - giants)
  const small = orgs - giants - large
  const tiers = [
    { count: giants, share: 0.68 },
    { count: large, share: 0.12 },
    { count: small, share: 0.2 },
  ].filter((tier) => tier.count > 0)
  const weights: number[] = []
  for (const tier of tiers) {
    for (let i = 0; i < tier.count; i++) weights.push((tier.share / tier.count) * (0.7 + random.next() * 0.6))
  }
  const sum = weights.reduce((a, b) => a + b, 0)
  return weights.map((w) => w / sum)
}

/** Splits `total` by `shares` exactly (largest remainders), so the counts asked for are the counts made. */
export function apportion(total: number, shares: readonly number[]): number[] {
  const raw = shares.map((share) => share * total)
  const counts = raw.map(Math.floor)
  let left = total - counts.reduce((a, b) => a + b, 0)
  const order = raw.map((value, i) => [value - Math.floor(value), i] as const).sort((a, b) => b[0] - a[0])
  for (const [, i] of order) {
    if (left-- <= 0) break
    counts[i] = (counts[i] ?? 0) + 1
  }
  return counts
}

export interface OrganizationBatch {
  readonly type: 'organization' | 'user' | 'membership' | 'staff' | 'service' | 'customer' | 'appointment'
  readonly rows: Row[]
}

const iso = (ms: number) => new Date(ms).toISOString()

/** The statuses of past appointments, each as often as it is drawn: completed most often, no_show rare. */
export const PAST_STATUSES: readonly string[] = [
  'completed',
  'completed',
  'completed',
  'completed',
  'completed',
  'completed',
  'cancelled',
  'no_show',
  'scheduled',
  'confirmed',
  'checked_in',
]

function statusFor(random: Random, startMs: number, nowMs: number): string {
  if (startMs > nowMs)
    return random.pick(['scheduled', 'scheduled', 'confirmed', 'confirmed', 'confirmed', 'cancelled'])
  if (nowMs - startMs < DAY / 4) return random.pick(['checked_in', 'confirmed', 'completed', 'no_show'])
  return random.pick(PAST_STATUSES)
}

/** What one organization's rows share: its random sequence, its "now", its place, its staff and services. */
interface OrganizationSetting {
  readonly random: Random
  readonly nowMs: number
  readonly orgId: string
  readonly city: string
  readonly region: string
  readonly country: string
  readonly currency: string
  readonly orgCreated: number
}

interface Service {
  readonly id: string
  readonly name: string
  readonly minutes: number
  readonly price: number
}

/** `count` rows of `type` made by `make`, in batches of at most `batchSize`. */
function* batched(
  type: OrganizationBatch['type'],
  count: number,
  batchSize: number,
  make: (n: number) => Row,
): Generator<OrganizationBatch> {
  let batch: Row[] = []
  for (let n = 0; n < count; n++) {
    batch.push(make(n))
    if (batch.length === batchSize) {
      yield { type, rows: batch }
      batch = []
    }
  }
  if (batch.length) yield { type, rows: batch }
}

const randomPhone = (random: Random) => `+1555${String(random.int(0, 9_999_999)).padStart(7, '0')}`

function customerRow(org: OrganizationSetting, staffIds: readonly string[], n: number): Row {
  const { random, nowMs } = org
  const first = random.pick(FIRST)
  const last = random.pick(LAST)
  const id = `cus_${random.hex(16)}`
  const created = org.orgCreated + Math.floor(random.next() * (nowMs - org.orgCreated))
  const phone = randomPhone(random)
  return {
    org_id: org.orgId,
    id,
    support_id: `S-${String(n + 1).padStart(6, '0')}`,
    first_name: first,
    last_name: last,
    display_name: `${first} ${last}`,
    email: `${first}.${last}.${n}@example.com`.toLowerCase().replace(/[^a-z0-9.@]/g, ''),
    phone,
    primary_phone: phone,
    secondary_phone: random.chance(0.2) ? randomPhone(random) : null,
    preferred_contact_method: random.pick(CONTACT),
    date_of_birth: random.chance(0.7)
      ? `${random.int(1945, 2008)}-${String(random.int(1, 12)).padStart(2, '0')}-${String(random.int(1, 28)).padStart(2, '0')}`
      : null,
    gender: random.chance(0.6) ? random.pick(GENDERS) : null,
    notes: random.chance(0.15)
      ? random.pick([
          'Prefers mornings',
          'Allergic to latex',
          'Sensitive scalp',
          'Bring referral letter',
          'Pays by invoice',
        ])
      : null,
    marketing_consent: random.chance(0.4),
    address_line1: `${random.int(1, 250)} ${random.pick(LAST)} Street`,
    city: org.city,
    region: org.region,
    postal_code: String(random.int(10000, 99999)),
    country: org.country,
    preferred_staff_id: random.chance(0.3) ? random.pick(staffIds) : null,
    is_active: random.chance(0.97),
    created_at: iso(created),
    updated_at: iso(Math.min(nowMs, created + random.int(0, 200) * DAY)),
  }
}

/** Payment columns: a completed appointment is paid, a confirmed one sometimes. */
function paymentOf(random: Random, status: string, paid: boolean, service: Service): Row {
  return {
    payment_status: paid ? 'paid' : status === 'cancelled' ? 'not_required' : 'unpaid',
    amount_paid_cents: paid ? service.price : null,
    payment_kind: paid ? random.pick(['card', 'cash', 'online']) : null,
    payment_id: paid ? `pay_${random.hex(12)}` : null,
    invoice_id: paid && random.chance(0.5) ? `inv_${random.hex(10)}` : null,
  }
}

/** One appointment over the last three years and the next 90 days, in a quarter-hour slot. */
function appointmentRow(
  org: OrganizationSetting,
  people: { readonly staffIds: readonly string[]; readonly customerIds: readonly string[] },
  services: readonly Service[],
): Row {
  const { random, nowMs } = org
  const from = nowMs - 3 * 365 * DAY
  const span = 3 * 365 * DAY + 90 * DAY
  const service = random.pick(services)
  // Quarter-hour slots between 08:00 and 19:00 UTC.
  const day = Math.floor((from + random.next() * span) / DAY) * DAY
  const start = day + 8 * 3_600_000 + random.int(0, 43) * 900_000
  const status = statusFor(random, start, nowMs)
  const paid = status === 'completed' || (status === 'confirmed' && random.chance(0.3))
  const requiresPayment = random.chance(0.25)
  const created = Math.min(start, nowMs) - random.int(0, 60) * DAY
  const customers = people.customerIds.length
  const customerId =
    customers > 0 && random.chance(0.97) ? (people.customerIds[random.int(0, customers - 1)] ?? null) : null
  return {
    org_id: org.orgId,
    id: `apt_${random.hex(16)}`,
    customer_id: customerId,
    staff_id: random.pick(people.staffIds),
    service_id: service.id,
    start_at: iso(start),
    end_at: iso(start + service.minutes * 60_000),
    status,
    location_type: random.pick(['in_person', 'in_person', 'in_person', 'online', 'phone']),
    resource_id: random.chance(0.3) ? `res_${random.int(1, 6)}` : null,
    price_cents: service.price,
    currency: org.currency,
    note: random.chance(0.1) ? 'Running 5 minutes late' : null,
    ...paymentOf(random, status, paid, service),
    requires_payment: requiresPayment,
    confirmed_after_payment: requiresPayment && paid,
    day_key: iso(start).slice(0, 10),
    is_active: random.chance(0.97),
    created_at: iso(created),
    updated_at: iso(Math.min(nowMs, created + random.int(0, 10) * DAY)),
  }
}

/** The organization, its owner and membership, its staff and its services: one batch each. */
function* organizationHead(
  org: OrganizationSetting,
  orgIndex: number,
  customers: number,
): Generator<OrganizationBatch, { staffIds: string[]; services: Service[] }> {
  const { random, orgId } = org
  const userId = `usr_${orgId}`
  yield {
    type: 'organization',
    rows: [
      {
        id: orgId,
        name: `${random.pick(LAST)} ${random.pick(['Studio', 'Clinic', 'Salon', 'Wellness', 'Physio'])} ${orgIndex}`,
        plan: random.pick(PLANS),
        created_at: iso(org.orgCreated),
      },
    ],
  }
  yield {
    type: 'user',
    rows: [
      {
        id: userId,
        email: `owner@${orgId.replaceAll('_', '-')}.example.com`,
        name: `${random.pick(FIRST)} ${random.pick(LAST)}`,
      },
    ],
  }
  yield { type: 'membership', rows: [{ org_id: orgId, user_id: userId, role: 'owner' }] }
  const staffIds = Array.from(
    { length: Math.min(60, Math.max(2, Math.ceil(customers / 400))) },
    (_, i) => `stf_${random.hex(12)}${i}`,
  )
  yield {
    type: 'staff',
    rows: staffIds.map((id, i) => ({
      org_id: orgId,
      id,
      name: `${random.pick(FIRST)} ${random.pick(LAST)}`,
      is_active: i === 0 || random.chance(0.92),
    })),
  }
  const services = Array.from({ length: random.int(4, 10) }, () => ({
    id: `srv_${random.hex(12)}`,
    name: random.pick(SERVICES),
    minutes: random.pick([15, 30, 45, 60, 90]),
    price: random.int(15, 180) * 100,
  }))
  yield {
    type: 'service',
    rows: services.map((s) => ({ org_id: orgId, id: s.id, name: s.name, is_active: true })),
  }
  return { staffIds, services }
}

/** Generates one organization's rows, in batches of at most `batchSize`, parents first. */
export function* organizationRows(
  orgIndex: number,
  customers: number,
  appointments: number,
  plan: SyntheticPlan,
  batchSize = 5_000,
): Generator<OrganizationBatch> {
  const random = new Random(plan.seed * 1_000_003 + orgIndex)
  // Anchored to the start of the UTC day, so that the same seed yields the same rows all day long.
  const nowMs = plan.now?.getTime() ?? Math.floor(Date.now() / DAY) * DAY
  const orgId = `org_${plan.seed}_${String(orgIndex).padStart(4, '0')}`
  const [city, region, country] = random.pick(CITIES)
  const currency = CURRENCY[country] ?? 'EUR'
  const orgCreated = nowMs - random.int(3 * 365, 6 * 365) * DAY
  const org: OrganizationSetting = { random, nowMs, orgId, city, region, country, currency, orgCreated }
  const { staffIds, services } = yield* organizationHead(org, orgIndex, customers)
  const customerIds: string[] = new Array(customers)
  yield* batched('customer', customers, batchSize, (n) => {
    const row = customerRow(org, staffIds, n)
    customerIds[n] = row.id as string
    return row
  })
  const people = { staffIds, customerIds }
  yield* batched('appointment', appointments, batchSize, () => appointmentRow(org, people, services))
}

export interface PlannedOrganization {
  readonly index: number
  readonly customers: number
  readonly appointments: number
}

export function planOrganizations(plan: SyntheticPlan): PlannedOrganization[] {
  const shares = organizationShares(plan.orgs, new Random(plan.seed))
  const customers = apportion(plan.customers, shares)
  const appointments = apportion(plan.appointments, shares)
  return shares.map((_, i) => ({
    index: i + 1,
    customers: customers[i] ?? 0,
    appointments: appointments[i] ?? 0,
  }))
}
