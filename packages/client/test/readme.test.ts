import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from './helpers/patience.js'
import { REPOSITORY_ROOT, startServer, type TestServer } from './helpers/server.js'
import { activeIds, codeBlocks, integratorProject } from './helpers/sync.js'

/**
 * The examples of the client's README and of the root README's "For integrators", run as
 * printed against a demo server (the only change: the demo's port, 3000 in the READMEs, is
 * this server's).
 */
const CLIENT_README = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
const ROOT_README = readFileSync(join(REPOSITORY_ROOT, 'README.md'), 'utf8')
/** The root README's section for integrators, up to the next section. */
const FOR_INTEGRATORS = /\n## For integrators\n([\s\S]*?)\n## /.exec(ROOT_README)?.[1] ?? ''

let server: TestServer
let directory: string

beforeAll(async () => {
  server = await startServer()
  directory = integratorProject('openbook-readme-')
}, patience(180_000))

afterAll(async () => {
  await server?.stop()
  if (directory) rmSync(directory, { recursive: true, force: true })
})

const local = (text: string) => text.replaceAll('http://127.0.0.1:3000', server.baseUrl)
const env = () => ({ ...process.env, OPENBOOK_KEY: server.key })

/** The five-line sync prints each customer, then each appointment since 2026. */
async function checkFiveLines(source: string | undefined, cwd: string): Promise<void> {
  expect(source?.trim().split('\n')).toHaveLength(5)
  const file = join(cwd, 'sync.mjs')
  writeFileSync(file, local(source ?? ''))
  const out = execFileSync(process.execPath, [file], { cwd, env: env(), encoding: 'utf8' })
  const customers = await activeIds(server, 'customers')
  const appointments = await activeIds(server, 'appointments', { startDate: '2026-01-01T00:00:00Z' })
  expect(
    out
      .trim()
      .split('\n')
      .map((line) => line.split(' ')[0]),
  ).toEqual([...customers, ...appointments])
}

/** The openbook-sync block: a customer file and an appointment file with a JSON summary. */
function checkSync(markdown: string, cwd: string): void {
  const commands = codeBlocks(markdown, 'sh').find((block) => block.includes('openbook-sync'))
  if (!commands) throw new Error('no openbook-sync example')
  const out = execFileSync('sh', ['-e', '-c', local(commands)], { cwd, env: env(), encoding: 'utf8' })
  const summary = JSON.parse(out.trim().split('\n').at(-1) ?? '{}')
  expect(summary).toMatchObject({ resource: 'appointments', complete: true })
  expect(readFileSync(join(cwd, 'customers.ndjson'), 'utf8').split('\n').length).toBeGreaterThan(100)
  // A key file the example writes is for its owner's eyes only.
  if (commands.includes('openbook.key')) expect(statSync(join(cwd, 'openbook.key')).mode & 0o077).toBe(0)
}

describe('the client README', () => {
  it(
    'the JavaScript examples run',
    async () => {
      const [fiveLines, more] = codeBlocks(CLIENT_README, 'js')
      await checkFiveLines(fiveLines, directory)
      const file = join(directory, 'more.mjs')
      writeFileSync(file, local(more ?? ''))
      const out = execFileSync(process.execPath, [file], { env: env(), encoding: 'utf8' })
      expect(out).toContain('limit: limit must be at most 100')
      expect(out).toMatch(/401 Invalid or expired API key req-/)
      // The nightly recipe: a first night copies every customer and marks nothing.
      const recipe = codeBlocks(CLIENT_README, 'js').find((block) => block.includes('.unchanged()'))
      const nightly = join(directory, 'nightly.mjs')
      writeFileSync(nightly, local(recipe ?? ''))
      const night = execFileSync(process.execPath, [nightly], { env: env(), encoding: 'utf8' })
      const customers = await activeIds(server, 'customers')
      expect(night.trim()).toBe(`${customers.length} rows, 0 missing, key expires never`)
    },
    patience(120_000),
  )

  it('the openbook-sync commands run', () => checkSync(CLIENT_README, directory), 120_000)

  it(
    'the sync API example runs',
    () => {
      const example = codeBlocks(CLIENT_README, 'js').find((block) => block.includes('@openbook/client/sync'))
      const file = join(directory, 'sync-api.mjs')
      writeFileSync(file, local(example ?? ''))
      const out = execFileSync(process.execPath, [file], { cwd: directory, env: env(), encoding: 'utf8' })
      expect(out.trim()).toMatch(/^org_demo true \d+ 0$/)
      expect(readFileSync(join(directory, 'exports/customers.ndjson'), 'utf8').length).toBeGreaterThan(100)
    },
    patience(120_000),
  )

  it(
    "the JavaScript examples of both READMEs and of the reference page compile under TypeScript's strict, exactOptionalPropertyTypes",
    async () => {
      // The reference page's samples (docs/api.html), from the script that writes it.
      const script = new URL('../../../scripts/build-docs.ts', import.meta.url).href
      const { CLIENT_SAMPLES } = (await import(script)) as { CLIENT_SAMPLES: Record<string, string> }
      const blocks = [
        ...codeBlocks(CLIENT_README, 'js'),
        ...codeBlocks(FOR_INTEGRATORS, 'js'),
        ...Object.values(CLIENT_SAMPLES),
      ]
      expect(blocks.length).toBeGreaterThanOrEqual(6)
      const project = mkdtempSync(join(directory, 'strict-'))
      const files = blocks.map((block, n) => {
        writeFileSync(join(project, `example-${n}.mts`), block)
        return `example-${n}.mts`
      })
      writeFileSync(
        join(project, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            module: 'nodenext',
            moduleResolution: 'nodenext',
            target: 'ES2022',
            strict: true,
            exactOptionalPropertyTypes: true,
            noUncheckedIndexedAccess: true,
            noEmit: true,
            typeRoots: [join(REPOSITORY_ROOT, 'node_modules/@types')],
            types: ['node'],
          },
          files,
        }),
      )
      const tsc = join(REPOSITORY_ROOT, 'node_modules/typescript/bin/tsc')
      try {
        execFileSync(process.execPath, [tsc, '-p', project], { cwd: directory, encoding: 'utf8' })
      } catch (error) {
        throw new Error(`the examples do not compile:\n${(error as { stdout?: string }).stdout ?? error}`)
      }
    },
    patience(120_000),
  )
})

describe('the root README, For integrators', () => {
  let base: string
  let project: string

  beforeAll(() => {
    // The install block as printed, from a repository checked out as ../openbook beside
    // ../my-integration; the tarball is packed there instead of into this working tree.
    base = mkdtempSync(join(tmpdir(), 'openbook-install-'))
    project = join(base, 'my-integration')
    mkdirSync(join(base, 'openbook'))
    mkdirSync(project)
    writeFileSync(join(project, 'package.json'), '{ "name": "my-integration", "private": true }\n')
    const install = codeBlocks(FOR_INTEGRATORS, 'sh').find((block) => block.includes('npm pack'))
    const [pack, ...rest] = (install ?? '').trim().split('\n')
    if (!pack?.startsWith('npm pack')) throw new Error('no install example')
    const quiet = {
      ...process.env,
      npm_config_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
    }
    const packHere = `${pack.replace(/\s+#.*$/, '')} --pack-destination ${join(base, 'openbook')}`
    execFileSync('sh', ['-e', '-c', packHere], { cwd: REPOSITORY_ROOT, env: quiet, stdio: 'ignore' })
    execFileSync('sh', ['-e', '-c', rest.join('\n')], {
      cwd: join(base, 'openbook'),
      env: quiet,
      stdio: 'ignore',
    })
  }, patience(120_000))

  afterAll(() => {
    if (base) rmSync(base, { recursive: true, force: true })
  })

  it(
    'installs the client from a tarball, and the five-line sync runs there',
    async () => {
      expect(readFileSync(join(project, 'node_modules/@openbook/client/package.json'), 'utf8')).toContain(
        '"@openbook/client"',
      )
      await checkFiveLines(codeBlocks(FOR_INTEGRATORS, 'js')[0], project)
    },
    patience(120_000),
  )

  it('the openbook-sync commands run there', () => checkSync(FOR_INTEGRATORS, project), 120_000)

  it('links to the guarantee, stated once in the client README with its limits', () => {
    expect(FOR_INTEGRATORS).toContain('(packages/client/README.md#the-no-missed-row-guarantee)')
    expect(FOR_INTEGRATORS).toContain('at most two')
    for (const words of [
      'exactly once',
      'With a window',
      'outside the window',
      'cost of overlap',
      'at most two',
    ])
      expect(CLIENT_README).toContain(words)
  })
})
