import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import { type Config, ConfigError, loadConfig } from './config.js'
import { ListFolder } from './domain/list-folder.js'
import { tuneGarbageCollector } from './gc-tuning.js'
import { flushLog, type LogDestination, logDestination, warnOfDroppedLines } from './log-destination.js'
import { LOG_SERIALIZERS } from './loggable-error.js'
import { CONTRACT_VERSION } from './openapi/document.js'
import { errorLine } from './operator-error.js'
import { Metrics } from './ops/metrics.js'
import { observedStore, type Readiness, storeReadiness } from './ops/readiness.js'
import { listenFailure, PortError, type PortPlan, planPorts } from './ports.js'
import { seedDemoIfEmpty } from './seed/demo.js'
import { guardSetUp } from './set-up.js'
import { DataDirBusyError } from './store/data-dir-lock.js'
import { connectingRole, describeStoreError, openStore } from './store/open.js'
import { connectionLimitWarning, readConnectionLimits } from './store/postgres/connection-budget.js'
import { LATEST_VERSION, refreshStatistics } from './store/schema/migrate.js'
import { ReaderPrivilegeError } from './store/schema/reader-privileges.js'
import { SchemaNotCurrentError, SchemaTooNewError } from './store/schema/schema-version.js'
import { assertCanServe } from './store/schema/serving.js'
import type { Store } from './store/types.js'

/**
 * The HTTP side's modules (Fastify, the routes and their schemas, the operator socket: about half a
 * second to load), loaded while the store opens, instead of before: the embedded store's thread
 * spends seconds starting PGlite meanwhile (a first start's critical path).
 */
function loadHttpModules() {
  return Promise.all([
    import('./app.js'),
    import('./ops/ops-app.js'),
    import('./cli/in-server.js'),
    import('./operator/server.js'),
  ])
}

/** Exits at once with one line on stderr: bad settings, an old schema, a store that cannot be opened. */
function fail(message: string): never {
  process.stderr.write(errorLine(message))
  process.exit(1)
}

class StartError extends Error {}

function packageVersion(): string {
  const file = new URL('../package.json', import.meta.url)
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version
}

async function prepareStore(config: Config, log: pino.Logger, metrics: Metrics): Promise<Store> {
  const store = await openStore(config, {
    command: 'an openbook server',
    onDataDirOpened: (origin) => {
      if (origin.made === 'template') log.info(`set-up: DATA_DIR (${config.dataDir}) made from the template`)
      if (origin.made === 'initdb' && origin.templateUnused) {
        log.warn(
          { template: origin.templateUnused },
          `set-up: DATA_DIR (${config.dataDir}) made by initdb: the template built by npm ci was not used (${origin.templateUnused}); npm run build makes it again`,
        )
      }
    },
    onIdleError: (error) => log.warn({ err: error }, 'idle database connection failed'),
    // PGlite has no autovacuum: the embedded store does its work in idle time. A statement that
    // held requests back for a second or more is said at info, the others at debug.
    autovacuum: {
      onRun: ({ table, statement, ms }) =>
        log[ms >= 1_000 ? 'info' : 'debug'](
          { table, ms },
          `embedded store: ${statement} ${table} took ${ms} ms (requests waited for it)`,
        ),
      onError: (error) =>
        log.warn({ err: error }, 'embedded store: vacuum or analyze failed; tried again at the next look'),
    },
    onPoolerDetected: (detail) =>
      log.warn(
        { detail },
        'DATABASE_PREPARED_STATEMENTS=on met a pooler in transaction mode; switched to pooler for this process ' +
          '(set DATABASE_PREPARED_STATEMENTS=pooler to start that way)',
      ),
    replicaEvents: {
      stateChanged: (state, detail) =>
        state === 'ok'
          ? log.info({ replica: state, detail }, 'list reads are back on the read replica')
          : log.warn({ replica: state, detail }, 'list reads fall back to the primary'),
      fellBack: (reason) => metrics.replicaFallback(reason),
    },
  })
  if (!config.databaseUrl) return store
  try {
    const role = await connectingRole(store)
    if (!role.canActAsReader) {
      throw new StartError(
        `the role in DATABASE_URL (${role.name}) is not a member of openbook_reader, so requests cannot run as it: ` +
          `connect as a dedicated member (docs/operators/production.md), or make it one: GRANT openbook_reader TO ${role.name}`,
      )
    }
    await assertCanServe(store)
    await warnOfConnectionLimits(store, config, log)
    if (role.privileged) {
      log.warn(
        'DATABASE_URL connects as a privileged role; requests run under SET LOCAL ROLE openbook_reader. ' +
          'In production, connect as a dedicated member of openbook_reader (see docs/operators/production.md).',
      )
    }
    return store
  } catch (error) {
    await store.close()
    throw error
  }
}

/** One warning line when this instance's pool could outgrow the connections the server leaves it. */
async function warnOfConnectionLimits(store: Store, config: Config, log: pino.Logger): Promise<void> {
  let limits: Awaited<ReturnType<typeof readConnectionLimits>>
  try {
    limits = await store.admin(readConnectionLimits)
  } catch (error) {
    // A hint, never a reason not to start.
    log.debug({ err: error }, 'could not read the connection limits')
    return
  }
  const open = store.pools().find((pool) => pool.database === 'primary')?.total ?? 0
  const warning = connectionLimitWarning(limits, { poolSize: config.databasePoolSize, extra: 2, open })
  if (warning) log.warn(warning)
}

/** How recently `/readyz` must have been asked for a drain without SHUTDOWN_DELAY_MS to be said. */
const POLLED_WITHIN_MS = 30_000

/**
 * A drain with SHUTDOWN_DELAY_MS 0 (its default, for a server without a balancer) while something
 * polls `/readyz`: the listener closes before the poller can see the instance draining.
 */
function warnOfNoShutdownDelay(config: Config, readiness: Readiness, log: pino.Logger): void {
  const asked = readiness.lastAskedAt
  if (config.shutdownDelayMs > 0 || asked === undefined || Date.now() - asked > POLLED_WITHIN_MS) return
  log.warn(
    'SHUTDOWN_DELAY_MS is 0 and /readyz is being polled: the listener closes now, before a load balancer can ' +
      'see this instance draining, and requests it still sends are refused; set SHUTDOWN_DELAY_MS above the time ' +
      'it takes to take an instance out (docs/operators/upgrading.md#a-rolling-upgrade)',
  )
}

function readConfig(): Config {
  try {
    return loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message)
    throw error
  }
}

/** The store, or an exit with the one line that says why not. */
async function openStoreOrFail(config: Config, log: pino.Logger, metrics: Metrics): Promise<Store> {
  try {
    return await prepareStore(config, log, metrics)
  } catch (error) {
    if (
      error instanceof StartError ||
      error instanceof SchemaNotCurrentError ||
      error instanceof SchemaTooNewError ||
      error instanceof ReaderPrivilegeError ||
      error instanceof DataDirBusyError
    )
      fail(error.message)
    fail(`cannot open the store: ${describeStoreError(error)}`)
  }
}

/** The embedded store at start: the demo organization on an empty store, fresh statistics. */
async function prepareEmbedded(store: Store, config: Config, out: LogDestination): Promise<void> {
  const demoKey = await seedDemoIfEmpty(store, config.apiKeyBrand)
  // PGlite runs no autovacuum: statistics are refreshed at each start, and the store vacuums in
  // its idle time (embedded-autovacuum.ts).
  await refreshStatistics(store)
  if (demoKey) {
    const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`
    // Through the log's stream, so that it comes after the lines logged before it.
    out.write(
      `\nSeeded a demo organization into ${config.dataDir}. Its test key (shown once):\n  ${demoKey}\n` +
        `Try:\n  curl -H "Authorization: Bearer ${demoKey}" "${base}/api/public/v1/customers?limit=2"\n\n`,
    )
  }
}

/** The ports, checked before any set-up; or an exit with the one line that names the variable. */
async function planPortsOrFail(config: Config): Promise<PortPlan> {
  try {
    return await planPorts(config)
  } catch (error) {
    if (error instanceof PortError) fail(error.message)
    throw error
  }
}

/** Opens the API's and the operations' listeners, or exits with one line that names the variable. */
async function listen(
  app: FastifyInstance,
  ops: FastifyInstance,
  store: Store,
  config: Config,
  ports: PortPlan,
  log: pino.Logger,
): Promise<void> {
  for (const [listener, variable, port, host] of [
    [app, 'PORT', config.port, config.host],
    [ops, 'OPS_PORT', ports.opsPort, config.opsHost],
  ] as const) {
    try {
      await listener.listen({ port, host })
    } catch (error) {
      await app.close()
      await store.close()
      fail(listenFailure(variable, host, port, (error as { code?: string }).code ?? 'error'))
    }
  }
  const address = ops.server.address()
  const opsPort = typeof address === 'object' && address ? address.port : ports.opsPort
  if (ports.moved) {
    log.warn(
      { opsPort },
      `${ports.moved}: the operations listener (healthz, readyz, metrics) is on ${config.opsHost}:${opsPort} instead; set OPS_PORT to choose its port`,
    )
  }
  log.info({ opsPort }, 'operations listener (healthz, readyz, metrics) ready')
}

async function main(): Promise<void> {
  tuneGarbageCollector()
  const config = readConfig()
  const logOut = logDestination()
  const log = pino({ level: config.logLevel, serializers: LOG_SERIALIZERS }, logOut)
  warnOfDroppedLines(logOut, log)
  // Before any set-up: a server that cannot listen stops at once, not after seeding its store.
  const ports = await planPortsOrFail(config)

  let store: Store | undefined
  const metrics = new Metrics({
    version: packageVersion(),
    contractVersion: CONTRACT_VERSION,
    pools: () => store?.pools() ?? [],
    ...(config.databaseReadUrl ? { replicaLagSeconds: () => store?.replicaLagSeconds?.() } : {}),
    listFolds: Boolean(config.databaseUrl),
  })
  const setUp = guardSetUp(log)
  const firstStart = !config.databaseUrl && !existsSync(join(config.dataDir, 'PG_VERSION'))
  setUp.phase(
    config.databaseUrl
      ? 'connecting to the database'
      : firstStart
        ? `creating the embedded store in DATA_DIR (${config.dataDir})`
        : `opening the embedded store in DATA_DIR (${config.dataDir})`,
    // The first start's set-up takes seconds (10 to 30 s without a template): said, so that the wait is not silent.
    firstStart,
  )
  const opening = openStoreOrFail(config, log, metrics)
  const httpModules = loadHttpModules()
  store = await opening
  const opened = store
  const [{ buildApp, DEFAULT_LAST_USED }, { buildOpsApp }, { inServerRunner }, { serveOperatorSocket }] =
    await httpModules
  const readiness = storeReadiness(store, config.readyOutageGraceMs)
  // Built on this thread while the embedded store works on its own (the demo, statistics). Every
  // request's outcome keeps readiness current between its checks.
  const built = Promise.all([
    buildApp({
      store: observedStore(store, readiness),
      config,
      metrics,
      lastUsed: { ...DEFAULT_LAST_USED, observer: metrics },
      logStream: logOut,
    }),
    buildOpsApp({ metrics, readiness }),
  ])
  built.catch(() => undefined)
  if (store.kind === 'embedded') {
    setUp.phase('preparing the store (the demo organization on an empty store, statistics)', firstStart)
    await prepareEmbedded(store, config, logOut)
  }
  const [app, ops] = await built
  const operatorSocket =
    store.kind === 'embedded'
      ? await serveOperatorSocket(config.dataDir, inServerRunner(store, config), { schema: LATEST_VERSION })
      : undefined

  // Where the salon software writes beside openbook (PostgreSQL), this server folds the lists'
  // pending changes in the background, on a connection of its own to the primary.
  const folder = store.foldLists
    ? new ListFolder(store.foldLists, log, { everyMs: config.listFoldIntervalMs, observer: metrics })
    : undefined

  setUp.done()
  closeWithGrace({ delay: 10_000 + config.shutdownDelayMs, logger: log }, async ({ signal, err }) => {
    if (err) log.error({ err }, 'shutting down after an unexpected error')
    else log.info({ signal }, 'shutting down: draining requests in flight')
    // Readiness turns off first, so that a load balancer stops sending before the listener closes.
    readiness.draining = true
    readiness.stop()
    warnOfNoShutdownDelay(config, readiness, log)
    if (config.shutdownDelayMs > 0) await sleep(config.shutdownDelayMs)
    // Operator commands running in this server (an import, a seed) are cancelled and roll back.
    await operatorSocket?.close()
    await app.close()
    await ops.close()
    await folder?.stop()
    await opened.close()
    await flushLog(logOut)
  })

  // The store was checked at start (prepareStore); from here on, in the background.
  readiness.start()
  folder?.start()
  await listen(app, ops, store, config, ports, log)
}

await main()
