import closeWithGrace from 'close-with-grace'
import { pino } from 'pino'
import { buildApp } from './app.js'
import type { CliContext } from './cli/context.js'
import { runCli } from './cli/program.js'
import { type Config, ConfigError, loadConfig } from './config.js'
import { seedDemoIfEmpty } from './seed/demo.js'
import { assertSchemaCurrent, refreshStatistics, SchemaNotCurrentError } from './store/migrate.js'
import { isPrivileged, openStore } from './store/open.js'
import { connectOperatorSocket, serveOperatorSocket } from './store/operator-socket.js'
import type { Store } from './store/types.js'

/** Exits at once with one line on stderr: bad settings, an old schema, a store that cannot be opened. */
function fail(message: string): never {
  process.stderr.write(`openbook: ${message}\n`)
  process.exit(1)
}

async function prepareStore(config: Config, log: pino.Logger): Promise<Store> {
  if (!config.databaseUrl) {
    const holder = await connectOperatorSocket(config.dataDir)
    if (holder) {
      holder.destroy()
      fail(`another openbook server is using DATA_DIR ${config.dataDir}`)
    }
  }
  const store = await openStore(config, {
    onIdleError: (error) => log.warn({ err: error }, 'idle database connection failed'),
  })
  if (config.databaseUrl) {
    await assertSchemaCurrent(store)
    if (await isPrivileged(store)) {
      log.warn(
        'DATABASE_URL connects as a privileged role; requests run under SET LOCAL ROLE openbook_reader. ' +
          'In production, connect as a dedicated member of openbook_reader (see README, Database roles).',
      )
    }
  }
  return store
}

function operatorContext(
  store: Store,
  config: Config,
  io: Parameters<Parameters<typeof serveOperatorSocket>[1]>[1],
): CliContext {
  return {
    stdout: io.stdout,
    stderr: io.stderr,
    stdin: io.stdin,
    interactive: false,
    apiKeyBrand: config.apiKeyBrand,
    openInput: async () => io.stdin,
    withStore: (work) => work(store),
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
    if (error instanceof SchemaNotCurrentError) fail(error.message)
    const { code, message } = error as { code?: string; message?: string }
    fail(`cannot open the store: ${code ?? message?.split('\n')[0] ?? 'unknown error'}`)
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
    operatorSocket?.close()
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
