// The reference page's `@openbook/client` examples (x-codeSamples, added by scripts/build-docs.ts)
// run as printed against a demo server, from a project with the client installed: the only change
// is the base URL (the reference's https://api.example.com is this server's).
import { execFileSync } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { startServer, type TestServer } from '../../packages/client/test/helpers/server.js'
import { activeIds, integratorProject } from '../../packages/client/test/helpers/sync.js'
import { referenceDocument } from '../../scripts/build-docs.js'

type Sample = { lang: string; label: string; source: string }

/** Each operation's client example, by operationId. */
function clientSamples(): Map<string, string> {
  const doc = referenceDocument() as {
    paths: Record<string, Record<string, { operationId?: string; 'x-codeSamples'?: Sample[] }>>
  }
  const samples = new Map<string, string>()
  for (const item of Object.values(doc.paths))
    for (const operation of Object.values(item)) {
      const sample = operation['x-codeSamples']?.find((s) => s.label === '@openbook/client')
      if (operation.operationId && sample) samples.set(operation.operationId, sample.source)
    }
  return samples
}

let server: TestServer
let directory: string

beforeAll(async () => {
  server = await startServer()
  directory = integratorProject('openbook-reference-')
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

describe('reference page: client examples', () => {
  it('every operation has one, and it uses the client', () => {
    const samples = clientSamples()
    expect([...samples.keys()].sort()).toEqual(['listAppointments', 'listCustomers'])
    for (const source of samples.values()) {
      expect(source).toContain("import { Openbook } from '@openbook/client'")
      expect(source).toContain('.all(')
    }
  })

  it(
    'they run against a demo server and page through every row',
    async () => {
      for (const [operationId, source] of clientSamples()) {
        const file = join(directory, `${operationId}.mjs`)
        writeFileSync(file, source.replaceAll('https://api.example.com', server.baseUrl))
        const out = execFileSync(process.execPath, [file], {
          cwd: directory,
          env: { ...process.env, OPENBOOK_KEY: server.key },
          encoding: 'utf8',
        })
        // The last lines are the ids that `.all()` yielded, in the list's order.
        const ids =
          operationId === 'listCustomers'
            ? await activeIds(server, 'customers')
            : await activeIds(server, 'appointments', { startDate: '2026-01-01T00:00:00Z' })
        expect(ids.length).toBeGreaterThan(0)
        expect(out.trim().split('\n').slice(-ids.length), operationId).toEqual(ids)
      }
    },
    patience(120_000),
  )
})
