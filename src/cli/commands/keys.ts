import type { Command } from 'commander'
import { type CreatedKey, createApiKey, listApiKeys, revokeApiKey } from '../../domain/api-keys.js'
import { type ReplayWait, waitForStandbys } from '../../domain/replication.js'
import type { CliContext } from '../context.js'
import { count, ensureEnv, expiryOf } from '../options.js'
import { printResult, printTable } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

interface CreateOptions {
  readonly org: string
  readonly as: string
  readonly env: string
  readonly name?: string
  readonly expiresIn?: string
  readonly expiresAt?: string
  readonly json?: boolean
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
  const standbys = replication.standbys.map((s) => `${s.name} in ${s.seconds.toFixed(2)} s`).join(', ')
  return (
    `revoked ${revoked.id} of ${revoked.orgId} at ${revoked.revokedAt}` +
    (standbys ? `; replayed by ${standbys} (WAL ${replication.lsn})` : '') +
    '\n'
  )
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
    .option(...JSON_OPTION)
    .action(async (options: CreateOptions) => {
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
      const rows = await context.withStore((store) => store.admin((sql) => listApiKeys(sql, options.org)))
      printResult(context, options, rows, () =>
        printTable(context, rows as unknown as Record<string, unknown>[], LIST_COLUMNS),
      )
    })
}

function registerRevoke(keys: Command, context: CliContext): void {
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
    .option(...JSON_OPTION)
    .action(async (keyId: string, options: { json?: boolean; waitTimeout: number }) => {
      const { revoked, replication } = await context.withStore(async (store) => {
        const revoked = await store.admin((sql) => revokeApiKey(sql, keyId))
        // Servers may read keys on a streaming replica: the promise holds once every standby has it.
        const replication = await waitForStandbys(store, options.waitTimeout * 1000)
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
