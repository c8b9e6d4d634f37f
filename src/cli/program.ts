import { randomBytes } from 'node:crypto'
import { Command, CommanderError, InvalidArgumentError } from 'commander'
import { KEY_ENVS, type KeyEnv } from '../domain/api-key-secret.js'
import {
  type CreateKeyInput,
  createApiKey,
  listApiKeys,
  MAX_KEY_LIFETIME_MS,
  revokeApiKey,
} from '../domain/api-keys.js'
import { PLANS, type Plan } from '../domain/plans.js'
import { waitForStandbys } from '../domain/replication.js'
import { importNdjson } from '../import/ndjson.js'
import { errorLine, failureReason, OperatorError } from '../operator/errors.js'
import { iso } from '../queries/page.js'
import { seedSynthetic } from '../seed/run.js'
import { migrate, refreshStatistics } from '../store/migrate.js'
import type { CliContext } from './context.js'
import { printJson, printTable, progressBar } from './output.js'

const DURATION = /^(\d+)([smhd])$/
const UNIT_MS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }

export function parseDuration(text: string): number {
  const match = DURATION.exec(text)
  if (!match)
    throw new OperatorError(`bad duration "${text}": use a number and s, m, h or d (for example 90d)`)
  return Number(match[1]) * (UNIT_MS[match[2] ?? 's'] ?? 1_000)
}

/** Whether YYYY-MM-DD at the start of `text` is a day of the calendar (not 30 February). */
function isCalendarDate(text: string): boolean {
  const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number]
  const date = new Date(Date.UTC(year, month - 1, day))
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day
}

function count(name: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number`)
    return Number(value)
  }
}

/** The expiry of --expires-in or --expires-at, checked before the store opens: a day that exists, ahead, within 100 years. */
function expiryOf(options: { expiresIn?: string; expiresAt?: string }): CreateKeyInput['expiry'] {
  if (options.expiresIn && options.expiresAt)
    throw new OperatorError('give --expires-in or --expires-at, not both')
  const now = Date.now()
  const check = (flag: string, text: string, at: number) => {
    if (at <= now) throw new OperatorError(`${flag} ${text}: the expiry must be in the future`)
    if (!(at <= now + MAX_KEY_LIFETIME_MS)) {
      throw new OperatorError(
        `${flag} ${text} is too far: an expiry must lie within 100 years (leave it out for a key that does not expire)`,
      )
    }
  }
  if (options.expiresIn) {
    const inMs = parseDuration(options.expiresIn)
    check('--expires-in', options.expiresIn, now + inMs)
    return { inMs }
  }
  if (options.expiresAt) {
    const at = new Date(options.expiresAt)
    if (Number.isNaN(at.getTime()) || !/^\d{4}-\d{2}-\d{2}/.test(options.expiresAt)) {
      throw new OperatorError(`bad --expires-at "${options.expiresAt}": use an ISO-8601 date-time`)
    }
    // Date reads 2027-02-30 as 2 March: a date the calendar does not have is a typo.
    if (!isCalendarDate(options.expiresAt)) {
      throw new OperatorError(`bad --expires-at "${options.expiresAt}": no such date`)
    }
    check('--expires-at', options.expiresAt, at.getTime())
    return { at }
  }
  return undefined
}

/** --name and --id of `orgs create`, checked before any SQL (the schema's own limits). */
function ensureText(flag: string, value: string, max: number): string {
  if (value.trim() === '') throw new OperatorError(`${flag} must not be empty`)
  if ([...value].length > max) throw new OperatorError(`${flag} must be at most ${max} characters`)
  return value
}

function ensurePlan(plan: string): Plan {
  if (!(PLANS as readonly string[]).includes(plan))
    throw new OperatorError(`bad plan "${plan}": use one of ${PLANS.join(', ')}`)
  return plan as Plan
}

function ensureEnv(env: string): KeyEnv {
  if (!(KEY_ENVS as readonly string[]).includes(env))
    throw new OperatorError(`bad env "${env}": use test or live`)
  return env as KeyEnv
}

/** The `openbook` command line; every action goes through `context`, so it runs the same locally or in a server. */
export function buildProgram(context: CliContext): Command {
  const program = new Command('openbook')
    .description('Operate an openbook API: schema, data, organizations and API keys')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => context.stdout.write(text),
      writeErr: (text) => context.stderr.write(text),
    })
    .showHelpAfterError('(run openbook --help for usage)')

  program
    .command('migrate')
    .description('apply pending migrations and maintain the openbook_reader role; safe to run again')
    .option('--json', 'print one JSON document')
    .action(async (options: { json?: boolean }) => {
      const result = await context.withStore((store) => migrate(store), { migrating: true })
      if (options.json) printJson(context, result)
      else
        context.stdout.write(
          result.applied.length
            ? `applied ${result.applied.join(', ')}; schema at version ${result.version}\n`
            : `schema already at version ${result.version}\n`,
        )
    })

  program
    .command('import')
    .description('load an NDJSON file (or - for standard input): all of it, or nothing')
    .argument('<file>', 'path of the NDJSON file, or - for standard input')
    .option('--json', 'print one JSON document')
    .action(async (file: string, options: { json?: boolean }) => {
      const input = await context.openInput(file)
      const progress = progressBar(context, undefined, 'lines')
      try {
        const summary = await context.withStore(async (store) => {
          const imported = await importNdjson(store, input, { onProgress: (lines) => progress.update(lines) })
          await refreshStatistics(store)
          return imported
        })
        progress.stop()
        if (options.json) printJson(context, summary)
        else {
          const parts = Object.entries(summary.counts).map(([type, n]) => `${type} ${n}`)
          const firstLoad = summary.firstLoad.length ? ` (first load of ${summary.firstLoad.join(', ')})` : ''
          context.stdout.write(
            `imported ${summary.lines} lines: ${parts.join(', ') || 'nothing'}${firstLoad}\n`,
          )
        }
      } finally {
        progress.stop()
      }
    })

  const orgs = program.command('orgs').description('organizations')
  orgs
    .command('create')
    .description('create an organization, and with --owner-email its owner')
    .requiredOption('--name <name>', 'display name')
    .requiredOption('--plan <plan>', PLANS.join(' | '))
    .option('--id <id>', 'organization id (default: generated)')
    .option('--owner-email <email>', 'create or reuse this user as the owner')
    .option('--json', 'print one JSON document')
    .action(
      async (options: { name: string; plan: string; id?: string; ownerEmail?: string; json?: boolean }) => {
        const name = ensureText('--name', options.name, 200)
        const plan = ensurePlan(options.plan)
        const id =
          options.id === undefined
            ? `org_${randomBytes(8).toString('hex')}`
            : ensureText('--id', options.id, 128)
        if (options.ownerEmail !== undefined && !/^[^@\s]+@[^@\s]+$/.test(options.ownerEmail))
          throw new OperatorError(`bad email "${options.ownerEmail}"`)
        const created = await context.withStore((store) =>
          store.admin(async (sql) => {
            const [exists] = await sql.query('SELECT 1 FROM organizations WHERE id = $1', [id])
            if (exists) throw new OperatorError(`organization ${id} exists already`)
            const [org] = await sql.query<{ createdAt: string }>(
              `INSERT INTO organizations (id, name, plan) VALUES ($1, $2, $3)
             RETURNING ${iso('created_at')} AS "createdAt"`,
              [id, name, plan],
            )
            let owner: { userId: string; email: string } | undefined
            if (options.ownerEmail) {
              const [user] = await sql.query<{ id: string }>(
                `INSERT INTO users (id, email) VALUES ($1, $2)
               ON CONFLICT (lower(email)) DO UPDATE SET email = users.email RETURNING id`,
                [`usr_${randomBytes(8).toString('hex')}`, options.ownerEmail],
              )
              await sql.query("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [
                id,
                user?.id,
              ])
              owner = { userId: String(user?.id), email: options.ownerEmail }
            }
            return { id, name, plan, createdAt: org?.createdAt, ...(owner ? { owner } : {}) }
          }),
        )
        if (options.json) printJson(context, created)
        else
          context.stdout.write(
            `created organization ${created.id} (${plan})${created.owner ? ` owned by ${created.owner.email}` : ''}\n`,
          )
      },
    )

  orgs
    .command('list')
    .description('organizations with plan and counts')
    .option('--json', 'print one JSON document')
    .action(async (options: { json?: boolean }) => {
      const rows = await context.withStore((store) =>
        store.admin((sql) =>
          sql.query<Record<string, unknown>>(
            `SELECT o.id, o.name, o.plan,
                    ${iso('o.created_at')} AS "createdAt",
                    (SELECT count(*)::int FROM memberships m WHERE m.org_id = o.id) AS members,
                    (SELECT count(*)::int FROM customers c WHERE c.org_id = o.id AND c.is_active) AS customers,
                    (SELECT count(*)::int FROM appointments a WHERE a.org_id = o.id AND a.is_active) AS appointments,
                    (SELECT count(*)::int FROM api_keys k WHERE k.org_id = o.id AND k.revoked_at IS NULL
                       AND (k.expires_at IS NULL OR k.expires_at > now())) AS "activeKeys"
             FROM organizations o ORDER BY o.created_at, o.id`,
          ),
        ),
      )
      if (options.json) printJson(context, rows)
      else
        printTable(context, rows, [
          'id',
          'name',
          'plan',
          'members',
          'customers',
          'appointments',
          'activeKeys',
        ])
    })

  const keys = program.command('keys').description('API keys')
  keys
    .command('create')
    .description('create an API key and print its secret, this once')
    .requiredOption('--org <orgId>', 'organization id')
    .requiredOption('--as <email>', 'acting user: an owner or admin of the organization')
    .requiredOption('--env <env>', 'test | live')
    .option('--name <name>', 'a label for the key')
    .option('--expires-in <duration>', 'lifetime: a number and s, m, h or d (90d)')
    .option('--expires-at <iso>', 'expiry as an ISO-8601 date-time')
    .option('--json', 'print one JSON document')
    .action(
      async (options: {
        org: string
        as: string
        env: string
        name?: string
        expiresIn?: string
        expiresAt?: string
        json?: boolean
      }) => {
        const env = ensureEnv(options.env)
        const expiry = expiryOf(options)
        const key = await context.withStore((store) =>
          store.admin((sql) =>
            createApiKey(sql, {
              orgId: options.org,
              actorEmail: options.as,
              env,
              name: options.name,
              expiry,
              brand: context.apiKeyBrand,
            }),
          ),
        )
        if (options.json) printJson(context, key)
        else
          context.stdout.write(
            `created ${env} key ${key.id} for ${key.orgId}${key.expiresAt ? `, expires ${key.expiresAt}` : ''}\n` +
              `secret (shown once, store it now): ${key.key}\n`,
          )
      },
    )

  keys
    .command('list')
    .description("the organization's keys, without secrets")
    .requiredOption('--org <orgId>', 'organization id')
    .option('--json', 'print one JSON document')
    .action(async (options: { org: string; json?: boolean }) => {
      const rows = await context.withStore((store) => store.admin((sql) => listApiKeys(sql, options.org)))
      if (options.json) printJson(context, rows)
      else
        printTable(context, rows as unknown as Record<string, unknown>[], [
          'id',
          'name',
          'env',
          'hint',
          'status',
          'createdAt',
          'lastUsedAt',
          'expiresAt',
          'revokedAt',
        ])
    })

  keys
    .command('revoke')
    .description('revoke a key: the very next request with it gets 401, also on read replicas')
    .argument('<keyId>', 'key id, as keys list shows it')
    .option(
      '--wait-timeout <seconds>',
      'how long to wait for standbys to replay the revocation',
      count('--wait-timeout'),
      30,
    )
    .option('--json', 'print one JSON document')
    .action(async (keyId: string, options: { json?: boolean; waitTimeout: number }) => {
      const { revoked, replication } = await context.withStore(async (store) => {
        const revoked = await store.admin((sql) => revokeApiKey(sql, keyId))
        // Servers may read keys on a streaming replica: the promise holds once every standby has it.
        const replication = await waitForStandbys(store, options.waitTimeout * 1000)
        return { revoked, replication }
      })
      if (options.json) printJson(context, { ...revoked, replication })
      else {
        const standbys = replication.standbys.map((s) => `${s.name} in ${s.seconds.toFixed(2)} s`).join(', ')
        context.stdout.write(
          `revoked ${revoked.id} of ${revoked.orgId} at ${revoked.revokedAt}` +
            (standbys ? `; replayed by ${standbys} (WAL ${replication.lsn})` : '') +
            '\n',
        )
      }
    })

  program
    .command('vacuum')
    .description(
      'reclaim the space and speed left by deleted rows and by failed or cancelled imports; --full ' +
        'gives the space back to the file system (it locks the tables meanwhile)',
    )
    .option('--full', 'rewrite the tables (VACUUM FULL): smaller files, reads wait meanwhile')
    .option('--json', 'print one JSON document')
    .action(async (options: { full?: boolean; json?: boolean }) => {
      const result = await context.withStore(async (store) => {
        const size = async () =>
          Number(
            (
              await store.admin((sql) =>
                sql.query<{ bytes: string }>('SELECT pg_database_size(current_database())::text AS bytes'),
              )
            )[0]?.bytes ?? 0,
          )
        const before = await size()
        await store.maintain(options.full ? 'VACUUM (FULL, ANALYZE)' : 'VACUUM (ANALYZE)')
        // The embedded store's WAL is its DATA_DIR's too: a checkpoint lets it be recycled.
        if (store.kind === 'embedded') await store.maintain('CHECKPOINT')
        return { full: Boolean(options.full), bytesBefore: before, bytesAfter: await size() }
      })
      if (options.json) printJson(context, result)
      else {
        const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`
        context.stdout.write(
          `vacuumed${result.full ? ' (full)' : ''}: database ${mb(result.bytesBefore)} → ${mb(result.bytesAfter)}\n`,
        )
      }
    })

  program
    .command('seed')
    .description('bulk synthetic data: skewed organization sizes, appointments over years')
    .requiredOption('--orgs <n>', 'organizations', count('--orgs'))
    .requiredOption('--customers <n>', 'customers in all', count('--customers'))
    .requiredOption('--appointments <n>', 'appointments in all', count('--appointments'))
    .option('--seed <s>', 'random seed: the same seed gives the same data', count('--seed'), 1)
    .option('--json', 'print one JSON document')
    .action(
      async (options: {
        orgs: number
        customers: number
        appointments: number
        seed: number
        json?: boolean
      }) => {
        if (options.orgs < 1) throw new OperatorError('--orgs must be at least 1')
        const total = options.customers + options.appointments
        const progress = progressBar(context, total, 'rows')
        const started = performance.now()
        try {
          const result = await context.withStore(async (store) => {
            const seeded = await seedSynthetic(store, options, ({ done }) => progress.update(done))
            await refreshStatistics(store)
            return seeded
          })
          progress.stop()
          const seconds = (performance.now() - started) / 1000
          const summary = {
            ...result.counts,
            seconds: Math.round(seconds * 10) / 10,
            rowsPerSecond: Math.round(total / seconds),
          }
          if (options.json)
            printJson(context, {
              counts: result.counts,
              orgIds: result.orgIds,
              seconds: summary.seconds,
              rowsPerSecond: summary.rowsPerSecond,
            })
          else
            context.stdout.write(
              `seeded ${options.orgs} organizations, ${options.customers} customers, ${options.appointments} appointments in ${summary.seconds}s (${summary.rowsPerSecond} rows/s)\n`,
            )
        } finally {
          progress.stop()
        }
      },
    )

  return program
}

/** Runs one command line; returns the exit status (0 success, 1 failure, 2 usage). */
export async function runCli(argv: readonly string[], context: CliContext): Promise<number> {
  const program = buildProgram(context)
  try {
    if (argv.length === 0) {
      program.outputHelp({ error: true })
      return 2
    }
    await program.parseAsync([...argv], { from: 'user' })
    return 0
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.code === 'commander.helpDisplayed' || error.code === 'commander.version' ? 0 : 2
    }
    context.stderr.write(errorLine(failureReason(error)))
    return 1
  }
}
