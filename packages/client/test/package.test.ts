import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REPOSITORY_ROOT } from './helpers/server.js'
import { integratorProject } from './helpers/sync.js'

const root = new URL('../', import.meta.url)
const TSC = join(REPOSITORY_ROOT, 'node_modules/typescript/bin/tsc')

describe('package layout', () => {
  it('is an ESM package with a CommonJS build, declarations for both, and no runtime dependencies', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'))
    expect(pkg.name).toBe('@openbook/client')
    expect(pkg.type).toBe('module')
    expect(pkg.dependencies ?? {}).toEqual({})
    for (const entry of ['.', './sync']) {
      expect(pkg.exports[entry].import.types).toMatch(/^\.\/dist\/.*\.d\.ts$/)
      expect(pkg.exports[entry].require.default).toMatch(/^\.\/dist\/cjs\/.*\.js$/)
    }
  })

  it('is built to dist with type declarations', async () => {
    expect(existsSync(new URL('dist/index.js', root))).toBe(true)
    expect(existsSync(new URL('dist/index.d.ts', root))).toBe(true)
    const built = await import(new URL('dist/index.js', root).href)
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'))
    expect(built.CLIENT_VERSION).toBe(pkg.version)
    // One version story: the client is released with the server, under the release's version.
    const release = JSON.parse(readFileSync(new URL('../../package.json', root), 'utf8'))
    expect(pkg.version).toBe(release.version)
  })

  it('ships source maps whose sources are in the package', () => {
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
        cwd: fileURLToPath(root),
        encoding: 'utf8',
        env: { ...process.env, npm_config_offline: 'true' },
      }),
    ) as { files: { path: string }[] }[]
    const files = new Set((packed?.files ?? []).map((file) => file.path))
    const maps = [...files].filter((path) => path.endsWith('.map'))
    expect(maps.length).toBeGreaterThan(10)
    const missing: string[] = []
    for (const map of maps) {
      const { sources, sourceRoot } = JSON.parse(readFileSync(new URL(map, root), 'utf8')) as {
        sources: string[]
        sourceRoot?: string
      }
      for (const source of sources) {
        const path = normalize(join(dirname(map), sourceRoot ?? '', source))
        if (!files.has(path)) missing.push(`${map} -> ${path}`)
      }
    }
    expect(missing).toEqual([])
  })
})

describe('a CommonJS project', () => {
  let project: string

  beforeAll(() => {
    project = integratorProject('openbook-cjs-')
    writeFileSync(
      join(project, 'package.json'),
      '{ "name": "my-cjs-integration", "private": true, "type": "commonjs" }\n',
    )
  })

  afterAll(() => {
    if (project) rmSync(project, { recursive: true, force: true })
  })

  it('requires the client and its sync API', () => {
    const script = join(project, 'plain.js')
    writeFileSync(
      script,
      `const { Openbook, OpenbookError, UsageError, BATCH_RETRY } = require('@openbook/client')
const { runSync, runPgSync } = require('@openbook/client/sync')
try {
  new Openbook({ apiKey: 'not a key', baseUrl: 'http://127.0.0.1:3000', retry: BATCH_RETRY })
} catch (error) {
  console.log(error instanceof UsageError && error instanceof OpenbookError, typeof runSync, typeof runPgSync)
}
`,
    )
    expect(execFileSync(process.execPath, [script], { cwd: project, encoding: 'utf8' }).trim()).toBe(
      'true function function',
    )
  })

  it('compiles under strict TypeScript (module node16, CommonJS output) and runs', () => {
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'node16',
          moduleResolution: 'node16',
          target: 'ES2022',
          strict: true,
          outDir: 'out',
          skipLibCheck: false,
          typeRoots: [join(REPOSITORY_ROOT, 'node_modules/@types')],
          types: ['node'],
        },
        files: ['index.ts'],
      }),
    )
    writeFileSync(
      join(project, 'index.ts'),
      `import { type Customer, Openbook, OpenbookError } from '@openbook/client'
import { runSync, type SyncSummary } from '@openbook/client/sync'

const names = (rows: Customer[]): string[] => rows.map((row) => row.displayName ?? row.id)
const summarize = (summary: SyncSummary): string => \`\${summary.orgId}: \${summary.rows}\`
try {
  new Openbook({ apiKey: 'not a key', baseUrl: 'http://127.0.0.1:3000' })
} catch (error) {
  if (error instanceof OpenbookError) console.log(error.code, typeof runSync, names([]).length, typeof summarize)
}
`,
    )
    execFileSync(process.execPath, [TSC, '-p', project], { cwd: project, encoding: 'utf8' })
    expect(readFileSync(join(project, 'out/index.js'), 'utf8')).toContain('require("@openbook/client")')
    expect(
      execFileSync(process.execPath, [join(project, 'out/index.js')], {
        cwd: project,
        encoding: 'utf8',
      }).trim(),
    ).toBe('invalid_usage function 0 function')
  })
})
