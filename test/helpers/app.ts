import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import type { LastUsedOptions } from '../../src/domain/last-used.js'
import type { Metrics } from '../../src/ops/metrics.js'
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
    logLevel?: 'info' | 'silent'
    metrics?: Metrics
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
    ...(options.metrics ? { metrics: options.metrics } : {}),
  })
  await app.ready()
  return { app, logs }
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

/** Listens on a free loopback port, for tests over real HTTP; resolves to the port. */
export async function listenOnLoopback(app: FastifyInstance): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  return (app.server.address() as AddressInfo).port
}
