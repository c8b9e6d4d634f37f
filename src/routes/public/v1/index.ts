import type { FastifyInstance } from 'fastify'
import type { LastUsedOptions } from '../../../domain/last-used.js'
import auth from '../../../plugins/auth.js'
import { appointmentsRoute } from './appointments.js'
import { customersRoute } from './customers.js'
import { type AnyListRoute, registerListRoute } from './list-route.js'

export const PUBLIC_V1_PREFIX = '/api/public/v1'
export const LIST_ROUTES: readonly AnyListRoute[] = [customersRoute, appointmentsRoute]

export interface PublicV1Options {
  readonly apiKeyBrand: string
  readonly lastUsed: LastUsedOptions
}

/** The authenticated scope: every route registered here passes the auth hook first. */
export default async function publicV1(app: FastifyInstance, options: PublicV1Options): Promise<void> {
  await app.register(auth, { apiKeyBrand: options.apiKeyBrand, lastUsed: options.lastUsed })
  app.addHook('onSend', (_request, reply, payload, done) => {
    reply.header('cache-control', 'no-store')
    done(null, payload)
  })
  for (const route of LIST_ROUTES) {
    registerListRoute(app, route)
  }
}
