import Fastify, { type FastifyInstance } from 'fastify'
import type { Metrics } from './metrics.js'

/** Whether this instance should get traffic; `draining` is set first thing on SIGTERM. */
export interface Readiness {
  draining: boolean
  /** Resolves when the store answers and its schema is current; rejects with the reason otherwise. */
  check(): Promise<void>
}

/** How long a readiness probe waits for the store before it answers 503. */
const CHECK_TIMEOUT_MS = 2_000

function withTimeout(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the store did not answer in time')), ms)
  })
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
}

/**
 * The operations listener, on a port of its own (OPS_PORT), never the public one: the public
 * surface stays exactly the contract's.
 * - `GET /healthz`: the process is up;
 * - `GET /readyz`: 200 only when the store answers, the schema is current and no drain has begun;
 * - `GET /metrics`: Prometheus text.
 */
export async function buildOpsApp(options: {
  metrics: Metrics
  readiness: Readiness
}): Promise<FastifyInstance> {
  const { metrics, readiness } = options
  const app = Fastify({ logger: false })
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    if (readiness.draining) return reply.code(503).send({ status: 'draining' })
    try {
      await withTimeout(readiness.check(), CHECK_TIMEOUT_MS)
      return { status: 'ready' }
    } catch (error) {
      // The reason is for operators on the loopback ops port; still one line, never a stack.
      const reason = (error as Error).message?.split('\n')[0] ?? 'not ready'
      return reply.code(503).send({ status: 'not ready', reason })
    }
  })
  app.get('/metrics', async (_request, reply) => {
    reply.type(metrics.contentType)
    return metrics.text()
  })
  return app
}
