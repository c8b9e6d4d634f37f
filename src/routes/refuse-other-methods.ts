import type { FastifyInstance } from 'fastify'
import { methodNotAllowed } from '../errors.js'

/** The write methods a path of this read-only API answers with 405 through a route of its own. */
export const NON_GET_METHODS = ['DELETE', 'OPTIONS', 'PATCH', 'POST', 'PUT'] as const

/**
 * Answers the write methods on `url` with 405 before any body is read. Every other method meets
 * no route and gets its 405 from the errors plugin (plugins/errors.ts), also before the body.
 */
export function refuseOtherMethods(app: FastifyInstance, url: string): void {
  app.route({
    method: [...NON_GET_METHODS],
    url,
    onRequest: async (request) => {
      throw methodNotAllowed(request.method)
    },
    handler: async () => undefined,
  })
}
