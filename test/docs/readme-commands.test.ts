// The README's commands, run as printed beside a demo server: the only change is the demo's
// address (http://127.0.0.1:3000 in the README is this server's), and DATA_DIR, which the README
// leaves at its default ./data, is the server's.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { startServer, type TestServer } from '../../packages/client/test/helpers/server.js'
import { codeBlocks } from '../../packages/client/test/helpers/sync.js'
import { cleanEnv, ROOT } from '../helpers/process.js'

const README = readFileSync(join(ROOT, 'README.md'), 'utf8')

/** The README's section `title`, up to the next section. */
function section(title: string): string {
  const match = new RegExp(`\\n## ${title}\\n([\\s\\S]*?)(?=\\n## |$)`).exec(README)
  if (!match?.[1]) throw new Error(`the README has no section ${title}`)
  return match[1]
}

interface Page {
  readonly data: { id: string; status?: string; start?: string }[]
  readonly pagination: { total: number; limit: number; offset: number }
}

let server: TestServer

beforeAll(async () => {
  server = await startServer()
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
})

describe('the README', () => {
  it(
    'Try it: the contract, a key made beside the running server, and two pages',
    () => {
      const [commands] = codeBlocks(section('Try it'), 'sh')
      expect(commands).toContain('curl')
      const out = execFileSync(
        'sh',
        ['-e', '-c', (commands ?? '').replaceAll('http://127.0.0.1:3000', server.baseUrl)],
        {
          cwd: ROOT,
          env: cleanEnv({ DATA_DIR: server.dataDir }),
          encoding: 'utf8',
        },
      )
      const [contract = '', ...pages] = out.trim().split('\n')
      expect(contract).toMatch(/^\{"openapi":"3\.1/)
      const [customers, appointments] = pages.map((line) => JSON.parse(line) as Page)
      expect(customers?.data).toHaveLength(2)
      expect(customers?.pagination).toMatchObject({ limit: 2, offset: 0 })
      expect(appointments?.data.length).toBeGreaterThan(0)
      for (const appointment of appointments?.data ?? []) {
        expect(appointment.status).toBe('completed')
        expect(Date.parse(appointment.start ?? '')).toBeGreaterThanOrEqual(Date.parse('2026-01-01T00:00:00Z'))
      }
    },
    patience(120_000),
  )
})
