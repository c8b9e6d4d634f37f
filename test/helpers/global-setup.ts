import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import type { TestProject } from 'vitest/node'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { migrate } from '../../src/store/schema/migrate.js'
import { ensureBuild, inputsHash } from './build.js'
import { ROOT, scratchRoot } from './process.js'
import { dropRole, rolesOfRun } from './roles.js'

export const ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string | null
    /** A PostgreSQL database migrated once for the run: test databases are created from it (stores.ts). */
    postgresTemplate: string | null
    /** A DATA_DIR migrated once for the run: embedded test stores open a copy of it (stores.ts). */
    embeddedTemplate: string
    /** Part of the name of every role this run creates (test/helpers/roles.ts). */
    roleTag: string
  }
}

/**
 * Roles are cluster-wide and outlive the run: every role a test creates must be dropped by its
 * teardown. This fails the run over any role of this run that is left, after dropping it.
 */
async function checkRolesDropped(roleTag: string): Promise<void> {
  const left = await rolesOfRun(ADMIN_URL, roleTag)
  if (left.length === 0) return
  for (const role of left) await dropRole(ADMIN_URL, role).catch(() => {})
  throw new Error(
    `The tests left ${left.length} PostgreSQL role(s) behind: ${left.join(', ')}. ` +
      'They have been dropped now; the test that created them must drop them in its teardown.',
  )
}

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/**
 * Data directories of runs killed before their teardown (in /dev/shm they hold memory): any older
 * than a day. A run going on beside this one is younger.
 */
function removeLeftovers(): void {
  const root = scratchRoot()
  for (const name of readdirSync(root)) {
    if (!/^openbook-(template|test)-/.test(name)) continue
    const path = join(root, name)
    if (Date.now() - statSync(path).mtimeMs > 86_400_000) rmSync(path, { recursive: true, force: true })
  }
}

/**
 * Creating and migrating an embedded store costs seconds of CPU (PGlite's initdb, then the
 * migrations); opening a copy of a migrated DATA_DIR costs a fraction of it. Made once per run,
 * from the current migrations.
 */
async function createEmbeddedTemplate(): Promise<{ dir: string; remove: () => void }> {
  removeLeftovers()
  const dir = mkdtempSync(join(scratchRoot(), 'openbook-template-'))
  const store = await createEmbeddedStore(dir, { shortLived: true })
  try {
    await migrate(store)
  } finally {
    await store.close()
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/**
 * The same for PostgreSQL: `CREATE DATABASE … TEMPLATE` copies a migrated database in a few
 * milliseconds, where migrating a new one takes a few hundred.
 */
async function createPostgresTemplate(roleTag: string): Promise<{ name: string; drop: () => Promise<void> }> {
  const name = `openbook_template_${roleTag}`
  await adminQuery(`CREATE DATABASE ${name}`)
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  const store = createPostgresStore({ connectionString: url.toString(), maxConnections: 1 })
  try {
    await migrate(store)
  } finally {
    await store.close()
  }
  return { name, drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
}

async function postgresReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3_000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    return true
  } catch (error) {
    if (process.env.CI || process.env.REQUIRE_POSTGRES === '1') {
      throw new Error(`PostgreSQL is required but unreachable at ${ADMIN_URL}: ${(error as Error).message}`)
    }
    process.stderr.write(
      `\n${'!'.repeat(78)}\n!! PostgreSQL unreachable at ${ADMIN_URL}: the PostgreSQL cases are SKIPPED.\n` +
        `!! Only the embedded (PGlite) cases run. Start PostgreSQL or set TEST_DATABASE_URL.\n${'!'.repeat(78)}\n\n`,
    )
    return false
  } finally {
    await client.end().catch(() => {})
  }
}

/**
 * The release tags of scripts/releases.txt, which a clone of one branch lacks: the release tests
 * check them, and the tests that run an earlier release check it out by its tag.
 */
function makeReleaseTags(): void {
  execFileSync(process.execPath, ['scripts/release-tags.js'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  })
}

/**
 * dist/ and the templates are of the sources as they were at the run's start. A source edited
 * during the run makes its failures (and its passes) say nothing of the code as it is now: the run
 * refuses to be a verdict, in its own words, instead of failing in others.
 */
function checkSourcesUnchanged(atStart: string): void {
  if (inputsHash() === atStart) return
  throw new Error(
    'The sources changed during this run: the binaries the tests spawned (dist/) and the migrated ' +
      'templates were built from the sources as they were at its start. Run the tests again.',
  )
}

/**
 * Before the integration tests: makes the release tags a clone lacks, builds dist/ if it is not
 * of the current sources (build.ts), makes the migrated templates the test stores are copied from,
 * and finds the PostgreSQL the tests use.
 * Under CI (or REQUIRE_POSTGRES=1) it must be there; elsewhere its absence skips the PostgreSQL
 * cases, loudly. Returns the teardown that removes the templates and checks that no role of this
 * run is left.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  makeReleaseTags()
  // Before the build and the templates, which are made of the sources as they are now.
  const sources = inputsHash()
  const roleTag = randomBytes(3).toString('hex')
  project.provide('roleTag', roleTag)
  const embedded = createEmbeddedTemplate()
  const postgres = postgresReachable().then((up) => (up ? createPostgresTemplate(roleTag) : undefined))
  // In a child process, beside the templates' creation.
  const build = ensureBuild()
  const failure = (await Promise.allSettled([embedded, postgres, build])).find(
    (outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected',
  )
  if (failure) {
    await embedded.then(
      (template) => template.remove(),
      () => {},
    )
    await postgres.then(
      (template) => template?.drop(),
      () => {},
    )
    throw failure.reason
  }
  const embeddedTemplate = await embedded
  const postgresTemplate = await postgres
  project.provide('embeddedTemplate', embeddedTemplate.dir)
  project.provide('postgresUrl', postgresTemplate ? ADMIN_URL : null)
  project.provide('postgresTemplate', postgresTemplate?.name ?? null)
  return async () => {
    embeddedTemplate.remove()
    if (postgresTemplate) {
      await postgresTemplate.drop()
      await checkRolesDropped(roleTag)
    }
    checkSourcesUnchanged(sources)
  }
}
