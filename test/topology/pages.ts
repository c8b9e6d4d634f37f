import { freePort } from '../helpers/process.js'
import type { Expected } from './load.js'
import { query } from './postgres.js'

/** Distinct free loopback ports. */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>()
  while (ports.size < count) ports.add(await freePort())
  return [...ports]
}

/**
 * What the primary itself says each request of the load must return: ids in list order and the
 * total, read directly by the superuser with plain SQL (count(*), not the counts tables).
 */
export async function expectedPages(
  url: string,
  keys: readonly { org: string; key: string }[],
): Promise<Expected[]> {
  const day = (offset: number) =>
    `${new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10)}T00:00:00Z`
  const since = day(-120)
  const until = day(30)
  const specs = [
    {
      path: 'customers?limit=20',
      table: 'customers',
      order: 'created_at',
      where: '',
      params: [],
      limit: 20,
      offset: 0,
    },
    {
      path: 'customers?limit=50&offset=200',
      table: 'customers',
      order: 'created_at',
      where: '',
      params: [],
      limit: 50,
      offset: 200,
    },
    {
      path: 'appointments?limit=20',
      table: 'appointments',
      order: 'start_at',
      where: '',
      params: [],
      limit: 20,
      offset: 0,
    },
    {
      path: 'appointments?status=completed&limit=10&offset=30',
      table: 'appointments',
      order: 'start_at',
      where: 'AND status = $2',
      params: ['completed'],
      limit: 10,
      offset: 30,
    },
    {
      path: `appointments?startDate=${since}&endDate=${until}&limit=25`,
      table: 'appointments',
      order: 'start_at',
      where: 'AND start_at >= $2::timestamptz AND start_at <= $3::timestamptz',
      params: [since, until],
      limit: 25,
      offset: 0,
    },
  ] as const
  const result: Expected[] = []
  for (const { org, key } of keys) {
    for (const spec of specs) {
      const where = `org_id = $1 AND is_active ${spec.where}`
      const ids = await query<{ id: string }>(
        url,
        `SELECT id FROM ${spec.table} WHERE ${where} ORDER BY ${spec.order} DESC, id DESC LIMIT ${spec.limit} OFFSET ${spec.offset}`,
        [org, ...spec.params],
      )
      const [count] = await query<{ total: number }>(
        url,
        `SELECT count(*)::int AS total FROM ${spec.table} WHERE ${where}`,
        [org, ...spec.params],
      )
      if (ids.length === 0) throw new Error(`no rows for ${org} ${spec.path}: the load would prove little`)
      result.push({
        path: `/api/public/v1/${spec.path}`,
        key,
        ids: ids.map((row) => row.id),
        total: count?.total ?? -1,
      })
    }
  }
  return result
}
