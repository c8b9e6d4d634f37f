import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import type { LastUsedObserver } from '../domain/last-used.js'
import type { ListFoldObserver } from '../domain/list-folder.js'
import { PoolExhaustedError, StoreBusyError } from '../store/busy.js'
import type { FoldReport, PoolStats } from '../store/types.js'

export interface MetricsSources {
  readonly version: string
  readonly contractVersion: string
  /** The store's pools, read at each scrape. */
  readonly pools?: () => readonly PoolStats[]
  /** Seconds the read replica is behind, read at each scrape; undefined without a replica. */
  readonly replicaLagSeconds?: () => number | undefined
  /** The server folds the lists in the background (PostgreSQL): its gauges and counters are served. */
  readonly listFolds?: boolean
}

/**
 * What the store's failures were, for `openbook_store_errors_total{kind}`: a closed set, so that
 * no label ever carries a message, a query value or an identifier.
 */
export type StoreErrorKind = 'busy' | 'pool_exhausted' | 'timeout' | 'lock_timeout' | 'connection' | 'other'

const CONNECTION_CODES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08000',
  '08003',
  '08006',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
])

export function storeErrorKind(error: unknown): StoreErrorKind {
  if (error instanceof StoreBusyError) return 'busy'
  // Overload: the database answers, and this instance's requests outnumber its connections.
  if (error instanceof PoolExhaustedError) return 'pool_exhausted'
  const { code, message } = error as { code?: string; message?: string }
  if (code === '57014') return 'timeout'
  if (code === '55P03') return 'lock_timeout'
  if (
    (code && CONNECTION_CODES.has(code)) ||
    /Connection terminated|connection error|timeout exceeded when trying to connect/i.test(message ?? '')
  )
    return 'connection'
  return 'other'
}

type RequestLabel = 'route' | 'method' | 'status'

/**
 * The process's Prometheus metrics, on a registry of its own. Labels are route patterns, methods,
 * statuses and closed sets of kinds: never a key, an organization, a customer or a query value.
 */
export class Metrics implements LastUsedObserver, ListFoldObserver {
  readonly registry = new Registry()
  readonly #requests: Counter<RequestLabel>
  readonly #duration: Histogram<RequestLabel>
  readonly #inFlight: Gauge
  readonly #storeErrors: Counter<'kind'>
  readonly #lastUsedLag: Gauge
  readonly #lastUsedFailures: Counter
  readonly #replicaFallbacks: Counter<'reason'>
  readonly #listFolds:
    | {
        readonly pending: Gauge
        readonly allPending: Gauge
        readonly folds: Counter
        readonly failures: Counter
      }
    | undefined
  /**
   * The label values of each route, method and status seen, and how many requests each answered
   * since the counter was last read: counted here and added to the counter when it is collected,
   * which costs a map lookup per request instead of prom-client's label checks and hashing.
   */
  readonly #series = new Map<string, { labels: Record<RequestLabel, string>; answered: number }>()
  #oldestPendingUse: number | undefined

  constructor(sources: MetricsSources) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'openbook_process_' })
    new Gauge({
      name: 'openbook_build_info',
      help: 'Build and contract version of this openbook; always 1',
      labelNames: ['version', 'contract'],
      registers,
    }).set({ version: sources.version, contract: sources.contractVersion }, 1)
    this.#requests = new Counter({
      name: 'openbook_http_requests_total',
      help: 'HTTP requests answered on the public port, by route pattern, method and status',
      labelNames: ['route', 'method', 'status'],
      registers,
      collect: () => {
        for (const series of this.#series.values()) {
          if (series.answered === 0) continue
          this.#requests.inc(series.labels, series.answered)
          series.answered = 0
        }
      },
    })
    this.#duration = new Histogram({
      name: 'openbook_http_request_duration_seconds',
      help: 'Time from the start of a request to the end of its response, by route pattern, method and status',
      labelNames: ['route', 'method', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    })
    this.#inFlight = new Gauge({
      name: 'openbook_http_requests_in_flight',
      help: 'Requests received on the public port and not yet answered',
      registers,
    })
    this.#storeErrors = new Counter({
      name: 'openbook_store_errors_total',
      help: 'Failures of the store on the request path, by kind (busy, pool_exhausted, timeout, lock_timeout, connection, other)',
      labelNames: ['kind'],
      registers,
    })
    this.#lastUsedLag = new Gauge({
      name: 'openbook_last_used_flush_lag_seconds',
      help: 'Age of the oldest key use not yet written to api_keys.last_used_at (0 when none waits)',
      registers,
      collect: () => {
        const oldest = this.#oldestPendingUse
        this.#lastUsedLag.set(oldest === undefined ? 0 : (Date.now() - oldest) / 1000)
      },
    })
    this.#lastUsedFailures = new Counter({
      name: 'openbook_last_used_flush_failures_total',
      help: 'Batches of key uses that could not be written',
      registers,
    })
    this.#replicaFallbacks = new Counter({
      name: 'openbook_replica_fallbacks_total',
      help: 'List reads sent to the primary because the replica was down or too far behind',
      labelNames: ['reason'],
      registers,
    })
    this.#listFolds = sources.listFolds ? listFoldMetrics(registers) : undefined
    const pools = sources.pools
    if (pools) {
      const poolGauge = (name: string, help: string, pick: (stats: PoolStats) => number) =>
        new Gauge({
          name,
          help,
          labelNames: ['database'],
          registers,
          collect() {
            for (const stats of pools()) this.set({ database: stats.database }, pick(stats))
          },
        })
      poolGauge('openbook_db_pool_connections', 'Connections open in the pool, by database', (s) => s.total)
      poolGauge(
        'openbook_db_pool_idle_connections',
        'Idle connections in the pool, by database',
        (s) => s.idle,
      )
      poolGauge(
        'openbook_db_pool_waiting_requests',
        'Requests waiting for a pooled connection, by database',
        (s) => s.waiting,
      )
    }
    const lag = sources.replicaLagSeconds
    if (lag) {
      new Gauge({
        name: 'openbook_replica_lag_seconds',
        help: 'How far the read replica is behind the primary, in seconds (NaN when unknown: unreachable, or not a standby)',
        registers,
        collect() {
          this.set(lag() ?? Number.NaN)
        },
      })
    }
  }

  requestStarted(): void {
    this.#inFlight.inc()
  }

  requestEnded(labels: { route: string; method: string; status: number }, seconds: number): void {
    this.#inFlight.dec()
    const key = `${labels.route} ${labels.method} ${labels.status}`
    let series = this.#series.get(key)
    if (!series) {
      const values = { route: labels.route, method: labels.method, status: String(labels.status) }
      series = { labels: values, answered: 0 }
      this.#series.set(key, series)
    }
    series.answered++
    this.#duration.observe(series.labels, seconds)
  }

  storeFailed(error: unknown): void {
    this.#storeErrors.inc({ kind: storeErrorKind(error) })
  }

  /** Last-used tracking: a use waits to be written (`since`), or every pending use was written. */
  lastUsedPending(since: number | undefined): void {
    this.#oldestPendingUse = since
  }

  lastUsedFlushFailed(): void {
    this.#lastUsedFailures.inc()
  }

  listsFolded(report: FoldReport): void {
    this.#listFolds?.pending.set(report.mostPending)
    this.#listFolds?.allPending.set(report.allPending)
    this.#listFolds?.folds.inc(report.folded)
    if (report.failed > 0) this.#listFolds?.failures.inc(report.failed)
  }

  listFoldFailed(): void {
    this.#listFolds?.pending.set(Number.NaN)
    this.#listFolds?.allPending.set(Number.NaN)
    this.#listFolds?.failures.inc()
  }

  replicaFallback(reason: 'down' | 'behind'): void {
    this.#replicaFallbacks.inc({ reason })
  }

  text(): Promise<string> {
    return this.registry.metrics()
  }

  get contentType(): string {
    return this.registry.contentType
  }
}

/** The background fold's metrics (ListFolder): what the last fold saw, NaN until one succeeds. */
function listFoldMetrics(registers: Registry[]) {
  const pending = new Gauge({
    name: 'openbook_list_pending_changes',
    help: 'Pending changes of the list with the most, as the last background fold left them (NaN before one, or after one failed)',
    registers,
  })
  const allPending = new Gauge({
    name: 'openbook_list_pending_changes_all_lists',
    help: 'Pending changes of all lists together, as the last background fold left them (NaN before one, or after one failed)',
    registers,
  })
  pending.set(Number.NaN)
  allPending.set(Number.NaN)
  const folds = new Counter({
    name: 'openbook_list_folds_total',
    help: "Lists whose pending changes this instance's background fold folded",
    registers,
  })
  const failures = new Counter({
    name: 'openbook_list_fold_failures_total',
    help: 'Background folds that failed (store unreachable, missing grant), and lists whose fold failed in the database while the call folded the others',
    registers,
  })
  return { pending, allPending, folds, failures }
}

const routeOf = (request: FastifyRequest) => request.routeOptions.url ?? '(no route)'

/** Counts and times every request of the app it is registered in, and its store failures. */
export const metricsPlugin = fp<{ metrics: Metrics }>(
  async (app: FastifyInstance, { metrics }) => {
    // Callback hooks: no promise per request.
    app.addHook('onRequest', (request, reply, done) => {
      metrics.requestStarted()
      // 'close' ends every response, answered or aborted: in-flight never drifts.
      reply.raw.once('close', () =>
        metrics.requestEnded(
          { route: routeOf(request), method: request.method, status: reply.statusCode },
          reply.elapsedTime / 1000,
        ),
      )
      done()
    })
    app.addHook('onError', (_request, _reply, error, done) => {
      // API errors (400, 401, …) are the client's; anything else on the request path is the store's.
      if ((error as { statusCode?: number }).statusCode === undefined || error instanceof StoreBusyError)
        metrics.storeFailed(error)
      done()
    })
  },
  { name: 'metrics' },
)
