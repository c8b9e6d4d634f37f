/**
 * What a loaded embedded store's pages wait on: the first, middle and last page of both lists (7
 * requests each, one at a time, through the app in this process), as the DATA_DIR is, then after
 * each maintenance statement in turn, with the statement's time. For a DATA_DIR loaded without the
 * vacuum that a seed or import now ends with (a copy: the statements change it).
 *
 *   node --import tsx bench/embedded-vacuum-parts.ts DATA_DIR ['ANALYZE;VACUUM list_changes;VACUUM']
 */
import { buildApp } from '../src/app.js'
import { createApiKey } from '../src/domain/api-keys.js'
import { createEmbeddedStore } from '../src/store/embedded/embedded.js'

const [dataDir, steps = 'ANALYZE;VACUUM list_changes;VACUUM customers;VACUUM appointments;VACUUM'] =
  process.argv.slice(2)
if (!dataDir) throw new Error('usage: embedded-vacuum-parts.ts DATA_DIR [STATEMENT;STATEMENT…]')

const store = await createEmbeddedStore(dataDir, { autovacuum: false })
const key = await store.admin(async (sql) => {
  const [owner] = await sql.query<{ orgId: string; email: string }>(
    `SELECT m.org_id AS "orgId", u.email FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.role = 'owner' ORDER BY m.org_id LIMIT 1`,
  )
  if (!owner) throw new Error('no organization in DATA_DIR')
  return createApiKey(sql, { orgId: owner.orgId, actorEmail: owner.email, env: 'test', brand: 'bench' })
})
const app = await buildApp({ store, config: { apiKeyBrand: 'bench', logLevel: 'silent' } })
await app.ready()
const [counts] = await store.admin((sql) =>
  sql.query<{ customers: number; appointments: number }>(
    `SELECT (SELECT count(*) FROM customers)::int AS customers, (SELECT count(*) FROM appointments)::int AS appointments`,
  ),
)
const pages = (['customers', 'appointments'] as const).flatMap((list) => {
  const rows = counts?.[list] ?? 0
  return [0, Math.floor(rows / 2), Math.max(0, rows - 100)].map(
    (offset, i) =>
      [
        `${list} ${['first', 'middle', 'last'][i]}`,
        `/api/public/v1/${list}?limit=100&offset=${offset}`,
      ] as const,
  )
})

async function measure(label: string): Promise<void> {
  const parts: string[] = []
  for (const [name, url] of pages) {
    const times: number[] = []
    for (let i = 0; i < 7; i++) {
      const started = performance.now()
      const response = await app.inject({ url, headers: { authorization: `Bearer ${key.key}` } })
      times.push(performance.now() - started)
      if (response.statusCode !== 200) throw new Error(`${url} answered ${response.statusCode}`)
    }
    times.sort((a, b) => a - b)
    parts.push(`${name} ${times[3]?.toFixed(1)}`)
  }
  process.stdout.write(`${label.padEnd(32)} median ms: ${parts.join(' | ')}\n`)
}

await measure('as it was')
for (const step of steps.split(';')) {
  const started = performance.now()
  await store.maintain(step)
  await measure(`${step} (${Math.round(performance.now() - started)} ms)`)
}
await app.close()
await store.close()
