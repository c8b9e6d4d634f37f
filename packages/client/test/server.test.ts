import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { documentFromUrl, GENERATED_PATH, generateTypes } from '../scripts/generate.js'
import { startServer, type TestServer } from './helpers/server.js'

let server: TestServer

beforeAll(async () => {
  server = await startServer()
}, 180_000)

afterAll(async () => {
  await server?.stop()
})

describe('generated types', () => {
  it('match the OpenAPI document the running server serves', async () => {
    const document = await documentFromUrl(`${server.baseUrl}/openapi.json`)
    const directory = mkdtempSync(join(tmpdir(), 'openbook-types-'))
    try {
      const fresh = join(directory, 'api.ts')
      writeFileSync(fresh, await generateTypes(document))
      // When this fails: npm run build && npm run generate -w @openbook/client, and commit the file.
      expect(readFileSync(fresh, 'utf8')).toBe(readFileSync(GENERATED_PATH, 'utf8'))
    } finally {
      rmSync(directory, { recursive: true, force: true })
    }
  })

  it('notice a change to the document', async () => {
    const document = await documentFromUrl(`${server.baseUrl}/openapi.json`)
    const schemas = (document.components?.schemas ?? {}) as Record<string, { properties?: object }>
    const customer = schemas.Customer
    if (!customer) throw new Error('no Customer schema')
    customer.properties = { ...customer.properties, loyaltyTier: { type: 'string' } }
    expect(await generateTypes(document)).not.toBe(readFileSync(GENERATED_PATH, 'utf8'))
  })
})
