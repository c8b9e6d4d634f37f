import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { hashSecret, secretPattern } from '../domain/api-key-secret.js'
import { type LastUsedOptions, LastUsedTracker } from '../domain/last-used.js'
import { ApiError, invalidApiKey, KEY_EXPIRES_HEADER, missingApiKey } from '../errors.js'
import { type AuthenticatedKey, authenticateKey, type KeyRefusal } from '../queries/api-keys.js'
import { KEY_ORGANIZATION, type Sql, type Tenant } from '../store/types.js'
import { techniques } from '../techniques.js'

/**
 * Work for the key's organization: `tenant` is its id, or `KEY_ORGANIZATION` where the statements
 * travel with the key lookup (`Sql.sendWithNext`) and the database binds it.
 */
export type TenantWork<T> = (sql: Sql, tenant: Tenant) => Promise<T>

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

const REFUSAL_CODES = {
  unknown: 'invalid_api_key',
  expired: 'expired_api_key',
  revoked: 'revoked_api_key',
} as const

/** A found key: its expiry told to the caller, its use recorded; a refused one: the 401 that says why. */
function accepted(found: AuthenticatedKey | KeyRefusal, reply: FastifyReply): AuthenticatedKey {
  if (typeof found === 'string') throw invalidApiKey(REFUSAL_CODES[found])
  if (found.expiresAt) reply.header(KEY_EXPIRES_HEADER, found.expiresAt.toUTCString())
  return found
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

    /** The presented key's hash, or why there is none to look up. */
    const presentedKey = (request: FastifyRequest): string | ApiError => {
      const header = request.headers.authorization
      if (header === undefined) return missingApiKey()
      // A key was sent, more than once: which one counts is ambiguous, so none does.
      if (authorizationHeaderCount(request.raw.rawHeaders) !== 1) return invalidApiKey()
      const token = BEARER.exec(header)?.[1]
      if (token === undefined) return missingApiKey()
      if (!keyFormat.test(token)) return invalidApiKey()
      return hashSecret(token)
    }

    /**
     * The key lookup waits for the work's first statement and goes with it: the work starts on
     * `KEY_ORGANIZATION` before the key is known. Without a key the organization is NULL, which
     * no row matches, and the work's result is never returned; the work is still let finish, so
     * that nothing of it outlives the transaction. A work that sends nothing (a query refused
     * after the key) lets the lookup go alone.
     */
    async function withKeyInOneTrip<T>(
      sql: Sql,
      keyHash: string,
      reply: FastifyReply,
      work: TenantWork<T>,
    ): Promise<T> {
      const lookup = authenticateKey(sql, keyHash, { withNext: true })
      // Runs until its first await: its first statement is sent then, with the lookup.
      const result = (async () => work(sql, KEY_ORGANIZATION))()
      // Settled here too, so that a failure while the key is checked is not reported unhandled.
      result.catch(() => undefined)
      let key: AuthenticatedKey
      try {
        await sql.flush?.()
        key = accepted(await lookup, reply)
      } catch (error) {
        await result.catch(() => undefined)
        throw error
      }
      tracker.seen(key.orgId, key.keyId, key.lastUsedAt)
      return result
    }

    /**
     * What `request.readAsTenant` runs: one read-only transaction of the store's, in which the key
     * is found active before the work's result counts; the work reads as the key's organization.
     */
    function readForKey<T>(keyHash: string, reply: FastifyReply, work: TenantWork<T>): Promise<T> {
      return app.store.read(
        async (sql) => {
          if (!sql.sendWithNext || !techniques.oneTrip) {
            const key = accepted(await authenticateKey(sql, keyHash), reply)
            tracker.seen(key.orgId, key.keyId, key.lastUsedAt)
            return work(sql, key.orgId)
          }
          return withKeyInOneTrip(sql, keyHash, reply, work)
        },
        // A list's read is its one message (list-route.ts, page.ts).
        { oneMessage: techniques.oneTrip },
      )
    }

    // A callback hook: no promise per request.
    app.addHook('onRequest', (request, reply, done) => {
      const keyHash = presentedKey(request)
      if (keyHash instanceof ApiError) return done(keyHash)
      request.readAsTenant = (work) => readForKey(keyHash, reply, work)
      done()
    })
  },
  { name: 'auth', dependencies: ['store'] },
)
