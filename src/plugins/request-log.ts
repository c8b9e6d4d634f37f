import fp from 'fastify-plugin'

/**
 * One line per request: method, route pattern, status, duration, request id.
 * Never the URL's query string, a header or a body: they may carry keys or personal data.
 */
export default fp(
  async (app) => {
    app.addHook('onSend', async (request, reply) => {
      reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff')
    })
    app.addHook('onResponse', async (request, reply) => {
      request.log.info(
        {
          method: request.method,
          route: request.routeOptions.url ?? '(no route)',
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 100) / 100,
        },
        'request',
      )
    })
  },
  { name: 'request-log' },
)
