import { z } from 'zod'
import { PIPELINE_DEPTH } from './store/postgres/pipeline.js'

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

/**
 * How the request path prepares its statements on PostgreSQL (store/postgres/postgres.ts):
 * - `on`: once per connection, which openbook remembers. Direct to PostgreSQL, or through a
 *   pooler in session mode.
 * - `pooler`: once per server connection, which the database checks in the same message (migration
 *   007). Behind a pooler in transaction mode (PgBouncer of any version: none tracks SQL-level
 *   PREPARE), where a client's transactions land on any server connection.
 * - `off`: never; each request plans its statements.
 */
export const PREPARED_STATEMENTS = ['on', 'pooler', 'off'] as const
export type PreparedStatements = (typeof PREPARED_STATEMENTS)[number]

const port = (fallback: string) =>
  z
    .string()
    .regex(/^\d{1,5}$/, 'must be a port number')
    .transform(Number)
    .pipe(z.number().int().min(0).max(65_535))
    .default(fallback)

const postgresUrl = z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')

/** Milliseconds as digits, at most `max`. */
const milliseconds = (max: number, fallback: string) =>
  z
    .string()
    .regex(/^\d{1,7}$/, 'must be a whole number of milliseconds')
    .transform(Number)
    .pipe(z.number().int().min(0).max(max))
    .default(fallback)

/** The environment the server and the CLI read, validated once at start. */
export const environmentSchema = z.object({
  PORT: port('3000'),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: postgresUrl.optional(),
  DATABASE_READ_URL: postgresUrl.optional(),
  DATABASE_READ_MAX_LAG_MS: milliseconds(3_600_000, '5000'),
  DATABASE_PREPARED_STATEMENTS: z.enum(PREPARED_STATEMENTS).default('on'),
  DATABASE_POOL_SIZE: z
    .string()
    .regex(/^\d{1,4}$/, 'must be a whole number of connections')
    .transform(Number)
    .pipe(z.number().int().min(1).max(1_000))
    .default('10'),
  DATABASE_IDLE_TIMEOUT_MS: milliseconds(3_600_000, '10000'),
  DATABASE_PIPELINE_DEPTH: z
    .string()
    .regex(/^\d{1,2}$/, 'must be a whole number of requests')
    .transform(Number)
    .pipe(z.number().int().min(1).max(8))
    .default(String(PIPELINE_DEPTH)),
  DATA_DIR: z.string().min(1).default('./data'),
  DATA_DIR_TEMPLATE: z.string().min(1).optional(),
  API_KEY_BRAND: z
    .string()
    .regex(/^[a-z][a-z0-9]{0,15}$/, 'must be 1-16 lowercase letters or digits, starting with a letter')
    .default('svc'),
  LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  OPS_PORT: port('9464'),
  OPS_HOST: z.string().min(1).default('127.0.0.1'),
  SHUTDOWN_DELAY_MS: milliseconds(600_000, '0'),
  READY_OUTAGE_GRACE_MS: milliseconds(600_000, '10000'),
  REQUEST_DEADLINE_MS: milliseconds(60_000, '8000'),
  LIST_FOLD_INTERVAL_MS: z
    .string()
    .regex(/^\d{1,5}$/, 'must be a whole number of milliseconds')
    .transform(Number)
    .pipe(z.number().int().min(100, 'must be at least 100').max(60_000))
    .default('1000'),
})

export interface Config {
  readonly port: number
  readonly host: string
  readonly databaseUrl: string | undefined
  /** A streaming replica for list reads; only with DATABASE_URL. */
  readonly databaseReadUrl: string | undefined
  /** Reads go to the primary while the replica is further behind than this. */
  readonly databaseReadMaxLagMs: number
  /** How the request path's statements are prepared (`PREPARED_STATEMENTS`). */
  readonly databasePreparedStatements: PreparedStatements
  /** Connections of the request path's pool, per database URL (the readiness check has one more of its own). */
  readonly databasePoolSize: number
  /** A pooled connection idle this long is closed (0: never), so that a burst's connections go back to the server. */
  readonly databaseIdleTimeoutMs: number
  /** How many read-only requests of one turn of the event loop share a connection, pipelined (1: none). */
  readonly databasePipelineDepth: number
  readonly dataDir: string
  /**
   * What a new embedded DATA_DIR is copied from (store/embedded/embedded-template.ts): a template directory,
   * or false (`none`): PGlite's initdb. Undefined: the one `npm run build` makes.
   */
  readonly dataDirTemplate: string | false | undefined
  readonly apiKeyBrand: string
  readonly logLevel: (typeof LOG_LEVELS)[number]
  /** The operations listener (health, readiness, metrics); never the public port. */
  readonly opsPort: number
  /** OPS_PORT was set: a taken port then stops the server; unset, a taken default moves the listener. */
  readonly opsPortFromEnv: boolean
  readonly opsHost: string
  /** After SIGTERM, /readyz answers 503 this long before the public listener closes. */
  readonly shutdownDelayMs: number
  /** /readyz stays 200 through an outage of the store (shared by every instance) this long. */
  readonly readyOutageGraceMs: number
  /** How long a request waits out an unreachable store (retrying) before it is answered 503. */
  readonly requestDeadlineMs: number
  /** On PostgreSQL, the background fold of the lists' pending changes runs this often (ListFolder). */
  readonly listFoldIntervalMs: number
}

export class ConfigError extends Error {}

/** Parses the environment; an empty variable counts as unset. Throws one line naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(
    Object.keys(environmentSchema.shape)
      .filter((name) => env[name] !== undefined && env[name] !== '')
      .map((name) => [name, env[name]]),
  )
  const parsed = environmentSchema.safeParse(present)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const name = String(issue?.path[0] ?? 'environment')
    throw new ConfigError(`invalid ${name}: ${issue?.message ?? 'invalid value'}`)
  }
  const value = parsed.data
  if (value.DATABASE_READ_URL && !value.DATABASE_URL) {
    throw new ConfigError(
      'invalid DATABASE_READ_URL: a read replica needs DATABASE_URL (the primary) as well',
    )
  }
  return {
    port: value.PORT,
    host: value.HOST,
    databaseUrl: value.DATABASE_URL,
    databaseReadUrl: value.DATABASE_READ_URL,
    databaseReadMaxLagMs: value.DATABASE_READ_MAX_LAG_MS,
    databasePreparedStatements: value.DATABASE_PREPARED_STATEMENTS,
    databasePoolSize: value.DATABASE_POOL_SIZE,
    databaseIdleTimeoutMs: value.DATABASE_IDLE_TIMEOUT_MS,
    databasePipelineDepth: value.DATABASE_PIPELINE_DEPTH,
    dataDir: value.DATA_DIR,
    dataDirTemplate: value.DATA_DIR_TEMPLATE === 'none' ? false : value.DATA_DIR_TEMPLATE,
    apiKeyBrand: value.API_KEY_BRAND,
    logLevel: value.LOG_LEVEL,
    opsPort: value.OPS_PORT,
    opsPortFromEnv: 'OPS_PORT' in present,
    opsHost: value.OPS_HOST,
    shutdownDelayMs: value.SHUTDOWN_DELAY_MS,
    readyOutageGraceMs: value.READY_OUTAGE_GRACE_MS,
    requestDeadlineMs: value.REQUEST_DEADLINE_MS,
    listFoldIntervalMs: value.LIST_FOLD_INTERVAL_MS,
  }
}
