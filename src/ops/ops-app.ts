import Fastify, { type FastifyInstance } from 'fastify'
import type { Metrics } from './metrics.js'
import type { Readiness } from './readiness.js'

export type { Readiness }

/**
 * The operations listener, on a port of its own (OPS_PORT), never the public one: the public
 * surface stays exactly the contract's.
 * - `GET /healthz`: the process is up (liveness: never the store's state, so that an outage of
 *   the store restarts no instance);
 * - `GET /readyz`: whether this instance can serve (readiness.ts);
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
  // Both answer from what the process already knows, in microseconds, whatever the store does:
  // a balancer's or an orchestrator's check time-out never meets a wait on the store.
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    readiness.lastAskedAt = Date.now()
    const { statusCode, body } = readiness.report()
    return reply.code(statusCode).send(body)
  })
  app.get('/metrics', async (_request, reply) => {
    reply.type(metrics.contentType)
    return metrics.text()
  })
  return app
}
