import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { expect } from 'vitest'
import { bearer } from './app.js'

/** One statement as the schema owner of `url`'s database, on a connection of its own. */
export async function asOwner<T extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<T>(sql, params)).rows
  } finally {
    await client.end()
  }
}

/**
 * The organization's appointments over HTTP against its tables: the total, the middle page of
 * 50, and the ETag, whose version is the list's changes folded plus those pending and which a
 * fold of everything keeps (304).
 */
export async function expectPagesOfTables(
  app: FastifyInstance,
  key: string,
  url: string,
  org: string,
): Promise<void> {
  const truth = await asOwner<{ id: string }>(
    url,
    'SELECT id FROM appointments WHERE org_id = $1 AND is_active ORDER BY start_at DESC, id DESC',
    [org],
  )
  const offset = Math.floor(truth.length / 2)
  const path = `/api/public/v1/appointments?limit=50&offset=${offset}`
  const response = await app.inject({ url: path, headers: bearer(key) })
  expect(response.statusCode).toBe(200)
  const body = response.json() as { data: { id: string }[]; pagination: { total: number } }
  expect(body.pagination.total).toBe(truth.length)
  expect(body.data.map((item) => item.id)).toEqual(truth.slice(offset, offset + 50).map((row) => row.id))
  const tag = String(response.headers.etag)
  const [version] = await asOwner<{ v: string }>(
    url,
    `SELECT ((SELECT coalesce(sum(changes), 0) FROM list_folds WHERE org_id = $1 AND list = 'appointments')
           + (SELECT count(*) FROM list_changes WHERE org_id = $1 AND list = 'appointments'))::text AS v`,
    [org],
  )
  expect(tag.startsWith(`"${version?.v}-`), `${tag} against version ${version?.v}`).toBe(true)
  await asOwner(url, 'SELECT list_fold_all()')
  const again = await app.inject({ url: path, headers: { ...bearer(key), 'if-none-match': tag } })
  expect(again.statusCode).toBe(304)
}
