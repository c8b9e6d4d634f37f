import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from './helpers/server.js'
import { codeBlocks, integratorProject } from './helpers/sync.js'

/**
 * The README's examples, run as printed against a demo server (the only change: the demo's
 * port, 3000 in the README, is this server's).
 */
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
const blocks = (language: string) => codeBlocks(README, language)

let server: TestServer
let directory: string

beforeAll(async () => {
  server = await startServer()
  directory = integratorProject('openbook-readme-')
}, 180_000)

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

const local = (text: string) => text.replaceAll('http://127.0.0.1:3000', server.baseUrl)
const env = () => ({ ...process.env, OPENBOOK_KEY: server.key })

describe('README examples', () => {
  it('the JavaScript examples run', () => {
    const [fiveLines, more] = blocks('js')
    expect(fiveLines?.trim().split('\n')).toHaveLength(4)
    for (const [n, source] of [fiveLines, more].entries()) {
      const file = join(directory, `example-${n}.mjs`)
      writeFileSync(file, local(source ?? ''))
      const out = execFileSync(process.execPath, [file], { env: env(), encoding: 'utf8' })
      if (n === 0) expect(out.trim().split('\n').length).toBeGreaterThan(100)
      else {
        expect(out).toContain('limit: limit must be at most 100')
        expect(out).toMatch(/401 Invalid or expired API key req-/)
      }
    }
  }, 120_000)

  it('the openbook-sync commands run', () => {
    const commands = blocks('sh').find((block) => block.includes('openbook-sync'))
    if (!commands) throw new Error('no openbook-sync example')
    const out = execFileSync('sh', ['-e', '-c', local(commands)], {
      cwd: directory,
      env: env(),
      encoding: 'utf8',
    })
    const summary = JSON.parse(out.trim().split('\n').at(-1) ?? '{}')
    expect(summary).toMatchObject({ resource: 'appointments', complete: true })
    expect(readFileSync(join(directory, 'customers.ndjson'), 'utf8').split('\n').length).toBeGreaterThan(100)
  }, 120_000)
})
