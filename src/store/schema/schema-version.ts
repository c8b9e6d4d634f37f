import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Sql } from '../types.js'

/**
 * Which openbook may run against which schema (docs/operators/upgrading.md).
 *
 * Every numbered migration from 008 on declares, in a header line, the oldest release that still
 * serves the schema it leaves: `-- compatible-from: N`, where N is the highest migration that
 * release knows. Migrations are expand-then-contract: a release's migrations keep the previous
 * release serving (N stays at the previous release's version), and the step that would break it
 * (a dropped column, a renamed table) ships a release later with its own, higher N.
 *
 * The schema publishes both numbers through `openbook_schema_version()` (migrate.ts). A release
 * that knows up to version L, on a schema at version V that serves releases from C:
 * - V = L: current;
 * - V < L: `openbook migrate` brings it up;
 * - V > L and C <= L: it serves (the rolling upgrade's previous release, or a rollback);
 *   `migrate` still refuses, as it cannot know what a newer release's migrations expect;
 * - V > L and C > L: it cannot serve: upgrade openbook.
 */

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url))
const NUMBERED = /^(\d{3})_[a-z0-9_]+\.sql$/
const COMPATIBLE_FROM = /^-- compatible-from: (\d+)$/m

export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
  /** The oldest release (by the highest migration it knows) that serves the schema after this one. */
  readonly compatibleFrom: number
}

/** The migrations before the version rules: each one needs a release that knows it. */
const LAST_UNDECLARED = 7

export class MigrationHeaderError extends Error {}

function compatibleFrom(version: number, name: string, sql: string): number {
  const declared = COMPATIBLE_FROM.exec(sql)?.[1]
  if (declared === undefined) {
    if (version <= LAST_UNDECLARED) return version
    throw new MigrationHeaderError(
      `migration ${name} has no \`-- compatible-from: N\` line: add it (README, Upgrading; store/migrations/README.md)`,
    )
  }
  const from = Number(declared)
  if (from >= version) {
    throw new MigrationHeaderError(
      `migration ${name} declares compatible-from ${from}: it must name an earlier version (${version - 1} keeps the previous release serving)`,
    )
  }
  return from
}

export function readMigrations(): Migration[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((file) => NUMBERED.test(file))
    .sort()
    .map((file) => {
      const version = Number(file.slice(0, 3))
      const sql = readFileSync(MIGRATIONS_DIR + file, 'utf8')
      return { version, name: file, sql, compatibleFrom: compatibleFrom(version, file, sql) }
    })
}

const MIGRATIONS = readMigrations()

/** The highest migration this release knows. */
export const LATEST_VERSION = Math.max(...MIGRATIONS.map((m) => m.version))

/** The oldest release that serves the schema at `version` (the highest compatible-from up to it). */
export function compatibleFromAt(version: number): number {
  return Math.max(0, ...MIGRATIONS.filter((m) => m.version <= version).map((m) => m.compatibleFrom))
}

export interface SchemaState {
  /** 0: no schema yet. */
  readonly version: number
  /** The oldest release that serves it; equal to `version` where the schema does not say. */
  readonly compatibleFrom: number
}

/**
 * The schema's version and compatibility, as any role that may execute
 * `openbook_schema_version()` reads them (a member of openbook_reader does), or as the owner
 * from the migrations table (`migrate`, before the function exists).
 */
export async function readSchemaState(sql: Sql, reader: 'owner' | 'anyone' = 'anyone'): Promise<SchemaState> {
  const [row] = await sql.query<{ table: boolean; published: boolean }>(
    `SELECT to_regclass('public.openbook_schema_migrations') IS NOT NULL AS table,
            to_regprocedure('public.openbook_schema_version()') IS NOT NULL AS published`,
  )
  if (!row?.table) return { version: 0, compatibleFrom: 0 }
  if (row.published && reader === 'anyone') {
    // The oldest releases published the version alone, as an integer: the column is then `v`.
    const [published] = await sql.query<{ v?: number; version?: number; compatible_from?: number }>(
      'SELECT * FROM public.openbook_schema_version() AS v',
    )
    const version = Number(published?.version ?? published?.v ?? 0)
    return { version, compatibleFrom: Number(published?.compatible_from ?? version) }
  }
  const [applied] = await sql.query<{ version: number | null; compatible_from: number | null }>(
    // The column came with the version rules: read through jsonb, it may be missing.
    `SELECT max(version) AS version,
            max((to_jsonb(m) ->> 'compatible_from')::int) AS compatible_from
     FROM openbook_schema_migrations m`,
  )
  const version = Number(applied?.version ?? 0)
  return { version, compatibleFrom: Number(applied?.compatible_from ?? version) }
}

/**
 * The state for the servability check: a schema from before openbook_schema_version() is one a
 * member of openbook_reader may not read (42501), and older than any release that checks.
 */
export async function readServableState(sql: Sql): Promise<SchemaState> {
  try {
    return await readSchemaState(sql)
  } catch (error) {
    if ((error as { code?: string }).code === '42501') throw new SchemaNotCurrentError('unreadable')
    throw error
  }
}

export type Servability = 'current' | 'newer-compatible' | 'needs-migrate' | 'needs-upgrade'

export function servability(state: SchemaState, latest: number = LATEST_VERSION): Servability {
  if (state.version === latest) return 'current'
  if (state.version < latest) return 'needs-migrate'
  return state.compatibleFrom <= latest ? 'newer-compatible' : 'needs-upgrade'
}

/** The schema is older than this release: `openbook migrate` brings it up. */
export class SchemaNotCurrentError extends Error {
  constructor(found: number | 'unreadable') {
    super(
      found === 'unreadable'
        ? `the database schema is older than this openbook (its version is not readable by this role): run \`openbook migrate\` as the owner`
        : `the database schema is at version ${found}; this openbook needs ${LATEST_VERSION}: run \`openbook migrate\``,
    )
  }
}

/** The schema is newer than this release knows, and does not declare that this release serves it. */
export class SchemaTooNewError extends Error {
  constructor(state: SchemaState, where = 'the schema') {
    super(
      `${where} is at version ${state.version}, which releases from version ${state.compatibleFrom} serve; ` +
        `this openbook knows up to ${LATEST_VERSION}: upgrade openbook`,
    )
  }
}

/** `migrate` of a release older than the schema: it refuses, and changes nothing. */
export class MigrateTooOldError extends Error {
  constructor(version: number) {
    super(
      `the schema is at version ${version}; this openbook knows up to ${LATEST_VERSION}: upgrade openbook`,
    )
  }
}

/** Throws unless this release may serve the schema (current, or a newer one that keeps it serving). */
export function assertServable(state: SchemaState, where?: string): void {
  switch (servability(state)) {
    case 'current':
    case 'newer-compatible':
      return
    case 'needs-migrate':
      throw new SchemaNotCurrentError(state.version)
    case 'needs-upgrade':
      throw new SchemaTooNewError(state, where)
  }
}
