import fp from 'fastify-plugin'
import { hashSecret, secretPattern } from '../domain/api-key-secret.js'
import { type LastUsedOptions, LastUsedTracker } from '../domain/last-used.js'
import { invalidApiKey, missingApiKey } from '../errors.js'
import { authenticateKey } from '../queries/api-keys.js'
import type { Sql } from '../store/types.js'

export type TenantWork<T> = (sql: Sql, orgId: string) => Promise<T>

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Runs `work` in one read-only transaction as `openbook_reader`, after the
     * presented key is found active; `orgId` is the key's organization, the
     * only tenant the work may read.
     */
    readAsTenant<T>(work: TenantWork<T>): Promise<T>
  }
}

export interface AuthOptions {
  readonly apiKeyBrand: string
  readonly lastUsed: LastUsedOptions
}

const BEARER = /^bearer +([^ ]+)$/i

/** Counts Authorization headers as sent: Node keeps only the first of duplicates. */
function authorizationHeaderCount(rawHeaders: readonly string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() === 'authorization') count++
  }
  return count
}

/** Bearer API-key authentication for the routes registered in the same scope. */
export default fp<AuthOptions>(
  async (app, options) => {
    const keyFormat = secretPattern(options.apiKeyBrand)
    const tracker = new LastUsedTracker(app.store, app.log, options.lastUsed)
    app.addHook('onClose', () => tracker.close())

    app.decorateRequest('readAsTenant', function unauthenticated(): never {
      throw missingApiKey()
    })

    app.addHook('onRequest', async (request) => {
      const header = request.headers.authorization
      if (header === undefined || authorizationHeaderCount(request.raw.rawHeaders) !== 1)
        throw missingApiKey()
      const token = BEARER.exec(header)?.[1]
      if (token === undefined) throw missingApiKey()
      if (!keyFormat.test(token)) throw invalidApiKey()
      const keyHash = hashSecret(token)
      request.readAsTenant = (work) =>
        app.store.read(async (sql) => {
          const key = await authenticateKey(sql, keyHash)
          if (!key) throw invalidApiKey()
          tracker.seen(key.orgId, key.keyId, key.lastUsedAt)
          return work(sql, key.orgId)
        })
    })
  },
  { name: 'auth', dependencies: ['store'] },
)
