import { afterAll, it } from 'vitest'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { createOrg } from '../helpers/fixtures.js'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import { migratedDataDir } from '../helpers/stores.js'

const data = migratedDataDir()
afterAll(() => data.remove())

it('the embedded server vacuums, in its first idle seconds, the dead rows a previous process left', async () => {
  // A process without the autovacuum writes 20,000 customers and deletes them: PGlite's counters
  // die with it, the dead rows stay.
  const before = await createEmbeddedStore(data.dir, { shortLived: true, autovacuum: false })
  await createOrg(before, 'org_left')
  await before.admin((sql) =>
    sql.query(
      `INSERT INTO customers (org_id, id, is_active, created_at, updated_at)
       SELECT 'org_left', 'cus_' || i, true, now(), now() FROM generate_series(1, 20000) i`,
    ),
  )
  await before.admin((sql) => sql.query(`DELETE FROM customers WHERE org_id = 'org_left'`))
  await before.close()

  const server = start(
    'node',
    ['dist/server.js'],
    cleanEnv({ DATA_DIR: data.dir, PORT: String(await freePort()), OPS_PORT: '0', LOG_LEVEL: 'debug' }),
  )
  try {
    await server.waitFor(
      /embedded store: VACUUM \(ANALYZE\) public\.customers took \d+ ms \(requests waited for it\)/,
      40_000,
    )
  } finally {
    server.child.kill('SIGTERM')
    await server.exited()
  }
})
