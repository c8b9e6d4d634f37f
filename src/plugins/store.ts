import fp from 'fastify-plugin'
import type { Store } from '../store/types.js'

declare module 'fastify' {
  interface FastifyInstance {
    readonly store: Store
  }
}

/** Makes the store (owned by the caller of buildApp) available to every plugin and route. */
export default fp<{ store: Store }>(
  async (app, { store }) => {
    app.decorate('store', store)
  },
  { name: 'store' },
)
