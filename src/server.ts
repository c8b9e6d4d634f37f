import closeWithGrace from 'close-with-grace'
import { pino } from 'pino'
import { buildApp } from './app.js'
import type { CliContext } from './cli/context.js'
import { runCli } from './cli/program.js'
import { type Config, ConfigError, loadConfig } from './config.js'
import { seedDemoIfEmpty } from './seed/demo.js'
import { cancellable } from './store/cancellable.js'
import { DataDirBusyError } from './store/data-dir-lock.js'
import { assertSchemaCurrent, refreshStatistics, SchemaNotCurrentError } from './store/migrate.js'
import { connectingRole, describeStoreError, openStore } from './store/open.js'
import { type ForwardedIo, serveOperatorSocket } from './store/operator-socket.js'
import type { Store } from './store/types.js'

/** Exits at once with one line on stderr: bad settings, an old schema, a store that cannot be opened. */
function fail(message: string): never {
  process.stderr.write(`openbook: ${message}\n`)
  process.exit(1)
}

class StartError extends Error {}

async function prepareStore(config: Config, log: pino.Logger): Promise<Store> {
  const store = await openStore(config, {
    command: 'an openbook server',
    onIdleError: (error) => log.warn({ err: error }, 'idle database connection failed'),
  })
  if (!config.databaseUrl) return store
  try {
    const role = await connectingRole(store)
    if (!role.canActAsReader) {
      throw new StartError(
        `the role in DATABASE_URL (${role.name}) is not a member of openbook_reader, so requests cannot run as it: ` +
          `connect as a dedicated member (README, Database roles), or make it one: GRANT openbook_reader TO ${role.name}`,
      )
    }
    await assertSchemaCurrent(store)
    if (role.privileged) {
      log.warn(
        'DATABASE_URL connects as a privileged role; requests run under SET LOCAL ROLE openbook_reader. ' +
          'In production, connect as a dedicated member of openbook_reader (see README, Database roles).',
      )
    }
    return store
  } catch (error) {
    await store.close()
    throw error
  }
}

function operatorContext(store: Store, config: Config, io: ForwardedIo): CliContext {
  return {
    stdout: io.stdout,
    stderr: io.stderr,
    stdin: io.stdin,
    interactive: false,
    apiKeyBrand: config.apiKeyBrand,
    openInput: async () => io.stdin,
    withStore: (work) => work(cancellable(store, io.signal)),
  }
}

async function main(): Promise<void> {
  let config: Config
  try {
    config = loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message)
    throw error
  }
  const log = pino({ level: config.logLevel })

  let store: Store
  try {
    store = await prepareStore(config, log)
  } catch (error) {
    if (
      error instanceof StartError ||
      error instanceof SchemaNotCurrentError ||
      error instanceof DataDirBusyError
    )
      fail(error.message)
    fail(`cannot open the store: ${describeStoreError(error)}`)
  }

  if (store.kind === 'embedded') {
    const demoKey = await seedDemoIfEmpty(store, config.apiKeyBrand)
    // PGlite runs no autovacuum: statistics are refreshed at each start.
    await refreshStatistics(store)
    if (demoKey) {
      const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`
      process.stdout.write(
        `\nSeeded a demo organization into ${config.dataDir}. Its test key (shown once):\n  ${demoKey}\n` +
          `Try:\n  curl -H "Authorization: Bearer ${demoKey}" "${base}/api/public/v1/customers?limit=2"\n\n`,
      )
    }
  }

  const app = await buildApp({ store, config })
  const operatorSocket =
    store.kind === 'embedded'
      ? await serveOperatorSocket(config.dataDir, (argv, io) =>
          runCli(argv, operatorContext(store, config, io)),
        )
      : undefined

  closeWithGrace({ delay: 10_000, logger: log }, async ({ signal, err }) => {
    if (err) log.error({ err }, 'shutting down after an unexpected error')
    else log.info({ signal }, 'shutting down: draining requests in flight')
    // Operator commands running in this server (an import, a seed) are cancelled and roll back.
    await operatorSocket?.close()
    await app.close()
    await store.close()
  })

  try {
    await app.listen({ port: config.port, host: config.host })
  } catch (error) {
    await store.close()
    fail(`cannot listen on ${config.host}:${config.port}: ${(error as { code?: string }).code ?? 'error'}`)
  }
}

await main()
