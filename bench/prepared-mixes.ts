import pg from 'pg'
import {
  busiestValues,
  countOf,
  type DataSet,
  databaseUrl,
  prepareDatabase,
  prepareOrganizations,
  type SeedInfo,
} from './data.js'
import { type BenchOrg, buildMixes, type Mix, type OrgSize } from './mixes.js'
import type { Crowd } from './options.js'

/** A data set ready to be loaded: seeded (or reused), its organizations, a monitor, its mixes. */
export interface PreparedMixes {
  readonly seed: SeedInfo
  readonly orgs: Record<OrgSize, BenchOrg>
  /** A connection of the bench's own (application name `openbook-bench-monitor`), to be ended. */
  readonly monitor: pg.Client
  readonly mixes: Mix[]
}

/**
 * The start of every PostgreSQL benchmark (`npm run bench`, `bench:yardstick`, `bench:shapes`):
 * the database seeded or reused (with `crowd`, the crowded organization too), its small, medium
 * and largest organizations with their keys, and the mixes (`only`: those whose id contains one of
 * its comma-separated texts) at the largest organization's busiest filter values.
 */
export async function prepareMixes(
  data: DataSet,
  log: (line: string) => void,
  options: { readonly crowd?: Crowd; readonly only?: string | undefined } = {},
): Promise<PreparedMixes> {
  const seed = await prepareDatabase(data, log, options.crowd)
  const orgs = await prepareOrganizations(data)
  const monitor = new pg.Client({ connectionString: databaseUrl(data, 'openbook-bench-monitor') })
  await monitor.connect()
  try {
    const context = { busiest: await busiestValues(monitor, orgs.large.id), now: new Date() }
    const count = (orgId: string, request: Mix['request']) => countOf(monitor, orgs.large.key, orgId, request)
    const mixes = await buildMixes(orgs, context, count, options.only)
    return { seed, orgs, monitor, mixes }
  } catch (error) {
    await monitor.end().catch(() => undefined)
    throw error
  }
}
