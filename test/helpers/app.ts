import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import type { LastUsedOptions } from '../../src/domain/last-used.js'
import type { TenantFilterOptions } from '../../src/queries/page.js'
import type { Store } from '../../src/store/types.js'
import { BRAND } from './fixtures.js'

export interface TestApp {
  readonly app: FastifyInstance
  /** Every log line the app wrote, as text. */
  readonly logs: string[]
}

export async function buildTestApp(
  store: Store,
  options: {
    lastUsed?: LastUsedOptions
    tenantFilter?: TenantFilterOptions
    logLevel?: 'info' | 'silent'
  } = {},
): Promise<TestApp> {
  const logs: string[] = []
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      logs.push(String(chunk))
      done()
    },
  })
  const app = await buildApp({
    store,
    config: { apiKeyBrand: BRAND, logLevel: options.logLevel ?? 'info' },
    logStream,
    ...(options.lastUsed ? { lastUsed: options.lastUsed } : {}),
    ...(options.tenantFilter ? { tenantFilter: options.tenantFilter } : {}),
  })
  await app.ready()
  return { app, logs }
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` })
