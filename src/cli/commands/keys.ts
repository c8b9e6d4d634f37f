import type { Command } from 'commander'
import {
  type BatchRevocation,
  type CreatedKey,
  createApiKeys,
  listApiKeys,
  MAX_KEYS_PER_CALL,
  revokeApiKey,
  revokeApiKeys,
} from '../../domain/api-keys.js'
import { type ReplayWait, waitForStandbys } from '../../domain/replication.js'
import { OperatorError } from '../../operator-error.js'
import type { CliContext } from '../context.js'
import { count, ensureEnv, expiryOf, parseDuration } from '../options.js'
import { afterCommit, writing } from '../outcome.js'
import { printResult, printTable } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

interface CreateOptions {
  readonly org: string
  readonly as: string
  readonly env: string
  readonly name?: string
  readonly expiresIn?: string
  readonly expiresAt?: string
  readonly count?: number
  readonly json?: boolean
}

interface RevokeOptions {
  readonly org?: string
  readonly all?: boolean
  readonly name?: string
  readonly olderThan?: string
  readonly createdBefore?: string
  readonly json?: boolean
  readonly waitTimeout: number
}

const LIST_COLUMNS = [
  'id',
  'name',
  'env',
  'hint',
  'status',
  'createdAt',
  'lastUsedAt',
  'expiresAt',
  'revokedAt',
] as const

function describeCreated(key: CreatedKey): string {
  return (
    `created ${key.env} key ${key.id} for ${key.orgId}${key.expiresAt ? `, expires ${key.expiresAt}` : ''}\n` +
    `secret (shown once, store it now): ${key.key}\n`
  )
}

function describeRevoked(revoked: { id: string; orgId: string; revokedAt: string }, replication: ReplayWait) {
  return `revoked ${revoked.id} of ${revoked.orgId} at ${revoked.revokedAt}${describeReplay(replication)}\n`
}

function describeReplay(replication: ReplayWait): string {
  const standbys = replication.standbys.map((s) => `${s.name} in ${s.seconds.toFixed(2)} s`).join(', ')
  return standbys ? `; replayed by ${standbys} (WAL ${replication.lsn})` : ''
}

function describeBatch(batch: BatchRevocation, replication: ReplayWait): string {
  const ids = batch.revoked.map((key) => `${key.id}\n`).join('')
  return `${ids}revoked ${batch.revoked.length} active keys of ${batch.orgId}${describeReplay(replication)}\n`
}

/** The keys a batch revocation takes, from its options; a selection must be said, never assumed. */
function selectionOf(options: RevokeOptions) {
  if (!options.org) {
    if (options.all || options.name !== undefined || options.olderThan || options.createdBefore) {
      throw new OperatorError(
        '--all, --name, --older-than and --created-before select keys of --org: give --org',
      )
    }
    return undefined
  }
  if (!options.all && options.name === undefined && !options.olderThan && !options.createdBefore) {
    throw new OperatorError(
      'say which keys of the organization to revoke: --all, --name NAME, --older-than DURATION or --created-before ISO',
    )
  }
  if (options.all && (options.name !== undefined || options.olderThan || options.createdBefore)) {
    throw new OperatorError('--all takes every active key: give it alone, or give only the conditions')
  }
  let createdBefore: Date | undefined
  if (options.createdBefore) {
    createdBefore = new Date(options.createdBefore)
    if (!/^\d{4}-\d{2}-\d{2}/.test(options.createdBefore) || Number.isNaN(createdBefore.getTime())) {
      throw new OperatorError(`bad --created-before "${options.createdBefore}": use an ISO-8601 date-time`)
    }
  }
  return {
    orgId: options.org,
    name: options.name,
    createdBefore,
    olderThanMs: options.olderThan ? parseDuration(options.olderThan) : undefined,
  }
}

function registerCreate(keys: Command, context: CliContext): void {
  keys
    .command('create')
    .description('create an API key and print its secret, this once')
    .requiredOption('--org <orgId>', 'organization id')
    .requiredOption('--as <email>', 'acting user: an owner or admin of the organization')
    .requiredOption('--env <env>', 'test | live')
    .option('--name <name>', 'a label for the key')
    .option('--expires-in <duration>', 'lifetime: a number and s, m, h or d (90d)')
    .option('--expires-at <iso>', 'expiry as an ISO-8601 date-time')
    .option(
      '--count <n>',
      `create this many keys alike in one transaction (at most ${MAX_KEYS_PER_CALL}); --json then prints one line a key`,
      count('--count'),
    )
    .option(...JSON_OPTION)
    .action(async (options: CreateOptions) => {
      const env = ensureEnv(options.env)
      const expiry = expiryOf(options)
      const created = {
        what:
          options.count === undefined ? `the new key of ${options.org}` : `the new keys of ${options.org}`,
        check:
          `see \`openbook keys list --org ${options.org}\`: a key created just now, whose secret you did not get, ` +
          'cannot be used; revoke it and create another',
      }
      const keys = await context.withStore((store) =>
        writing(created, () =>
          store.admin((sql) =>
            createApiKeys(
              sql,
              {
                orgId: options.org,
                actorEmail: options.as,
                env,
                name: options.name,
                expiry,
                brand: context.apiKeyBrand,
              },
              options.count ?? 1,
            ),
          ),
        ),
      )
      if (options.count !== undefined) {
        // One key a line, so that a batch streams into a file or a loop (`--json`), or one line of text each.
        for (const key of keys) {
          context.stdout.write(
            options.json
              ? `${JSON.stringify(key)}\n`
              : `${key.id} ${key.key}${key.expiresAt ? ` ${key.expiresAt}` : ''}\n`,
          )
        }
        return
      }
      const [key] = keys as [CreatedKey]
      printResult(context, options, key, () => context.stdout.write(describeCreated(key)))
    })
}

function registerList(keys: Command, context: CliContext): void {
  keys
    .command('list')
    .description("the organization's keys, without secrets")
    .requiredOption('--org <orgId>', 'organization id')
    .option(...JSON_OPTION)
    .action(async (options: { org: string; json?: boolean }) => {
      const rows = await context.withStore((store) => store.admin((sql) => listApiKeys(sql, options.org)), {
        idempotent: true,
      })
      printResult(context, options, rows, () =>
        printTable(context, rows as unknown as Record<string, unknown>[], LIST_COLUMNS),
      )
    })
}

function registerRevoke(keys: Command, context: CliContext): void {
  keys
    .command('revoke')
    .description(
      "revoke a key, or a batch of an organization's keys in one transaction: the very next request with any of them gets 401, also on read replicas",
    )
    .argument('[keyId]', 'key id, as keys list shows it')
    .option(
      '--org <orgId>',
      'revoke active keys of this organization (with --all, --name, --older-than or --created-before)',
    )
    .option('--all', 'every active key of --org')
    .option('--name <name>', 'the active keys of --org with this name')
    .option(
      '--older-than <duration>',
      'the active keys of --org created longer ago than this (90d), by the database clock',
    )
    .option('--created-before <iso>', 'the active keys of --org created before this ISO-8601 date-time')
    .option(
      '--wait-timeout <seconds>',
      'how long to wait for standbys to replay the revocation',
      count('--wait-timeout'),
      30,
    )
    .option(...JSON_OPTION)
    .action(async (keyId: string | undefined, options: RevokeOptions) => {
      const selection = selectionOf(options)
      if ((keyId === undefined) === (selection === undefined)) {
        throw new OperatorError('give a key id, or --org with the keys to revoke, not both')
      }
      if (selection) {
        const again = `run the same \`openbook keys revoke --org ${selection.orgId} …\` again: it revokes the keys still active and prints them`
        const { batch, replication } = await context.withStore(async (store) => {
          const batch = await writing(
            { what: `the revocation of keys of ${selection.orgId}`, check: again },
            () => store.admin((sql) => revokeApiKeys(sql, selection)),
          )
          const replication = await afterCommit(
            `revoked ${batch.revoked.length} keys of ${batch.orgId}`,
            again,
            () => waitForStandbys(store, options.waitTimeout * 1000),
          )
          return { batch, replication }
        })
        printResult(context, options, { ...batch, replication }, () =>
          context.stdout.write(describeBatch(batch, replication)),
        )
        return
      }
      const again = `run \`openbook keys revoke ${keyId}\` again: it revokes the key if it is not yet, and prints when it was`
      const { revoked, replication } = await context.withStore(async (store) => {
        const revoked = await writing({ what: `the revocation of ${keyId}`, check: again }, () =>
          store.admin((sql) => revokeApiKey(sql, keyId as string)),
        )
        // Servers may read keys on a streaming replica: the promise holds once every standby has it.
        const replication = await afterCommit(
          `revoked ${revoked.id} of ${revoked.orgId} at ${revoked.revokedAt}`,
          again,
          () => waitForStandbys(store, options.waitTimeout * 1000),
        )
        return { revoked, replication }
      })
      printResult(context, options, { ...revoked, replication }, () =>
        context.stdout.write(describeRevoked(revoked, replication)),
      )
    })
}

export const registerKeys: RegisterCommand = (program, context) => {
  const keys = program.command('keys').description('API keys')
  registerCreate(keys, context)
  registerList(keys, context)
  registerRevoke(keys, context)
}
