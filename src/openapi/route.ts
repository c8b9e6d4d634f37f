import type { FastifyInstance } from 'fastify'
import { LIST_ROUTES, PUBLIC_V1_PREFIX } from '../routes/public/v1/index.js'
import { refuseOtherMethods } from '../routes/refuse-other-methods.js'
import { buildOpenApiDocument } from './document.js'

/** Serves the machine-readable contract without authentication. */
export default async function openapi(app: FastifyInstance): Promise<void> {
  const body = JSON.stringify(buildOpenApiDocument(PUBLIC_V1_PREFIX, LIST_ROUTES))
  app.get('/openapi.json', async (_request, reply) => {
    reply
      .header('content-type', 'application/json; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
    return body
  })
  refuseOtherMethods(app, '/openapi.json')
}
