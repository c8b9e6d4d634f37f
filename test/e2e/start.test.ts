import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { cleanEnv, ROOT, spawnCollecting } from '../helpers/process.js'

/**
 * `npm start` after a `git pull`: it serves the current sources. A project of one source file
 * with the repository's own `start` script and scripts/ stands in for the repository, so that
 * building it costs a second and the tests' own dist/ is never rebuilt under them.
 */
const dir = mkdtempSync(join(tmpdir(), 'openbook-start-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const realPackage = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>
}

function setUp(): void {
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'start-fixture',
      private: true,
      type: 'module',
      scripts: { start: realPackage.scripts.start },
    }),
  )
  for (const file of ['start.js', 'build-inputs.js', 'copy-migrations.js']) {
    cpSync(join(ROOT, 'scripts', file), join(dir, 'scripts', file))
  }
  cpSync(join(ROOT, 'tsconfig.build.json'), join(dir, 'tsconfig.build.json'))
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        skipLibCheck: true,
        types: ['node'],
      },
    }),
  )
  mkdirSync(join(dir, 'src', 'store', 'migrations'), { recursive: true })
  writeFileSync(join(dir, 'src', 'store', 'migrations', '001_schema.sql'), '-- schema\n')
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'))
}

const source = (text: string) => writeFileSync(join(dir, 'src', 'server.ts'), text)

function npmStart(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const run = spawnCollecting('npm', ['start', '--silent'], { cwd: dir, env: cleanEnv({}) })
  run.child.stdin.end()
  return run.closed.then((code) => ({ code, stdout: run.stdout(), stderr: run.stderr() }))
}

describe('npm start serves the current sources', () => {
  it(
    'dist/ missing: built, then served; current: served as it is; sources changed (a git pull): built again',
    async () => {
      setUp()
      source("process.stdout.write('serving v1\\n')\n")
      const first = await npmStart()
      expect(first).toEqual({
        code: 0,
        stdout: 'serving v1\n',
        stderr: 'openbook: dist/ is missing: building it (tsc -p tsconfig.build.json)\n',
      })
      expect(readFileSync(join(dir, 'dist', 'store', 'migrations', '001_schema.sql'), 'utf8')).toBe(
        '-- schema\n',
      )

      expect(await npmStart()).toEqual({ code: 0, stdout: 'serving v1\n', stderr: '' })

      source("process.stdout.write('serving v2\\n')\n")
      expect(await npmStart()).toEqual({
        code: 0,
        stdout: 'serving v2\n',
        stderr:
          'openbook: the sources changed since dist/ was built: building it (tsc -p tsconfig.build.json)\n',
      })

      // A dist/ built before there was a record: its age decides.
      rmSync(join(dir, 'dist', '.build-inputs'))
      expect(await npmStart()).toEqual({ code: 0, stdout: 'serving v2\n', stderr: '' })
      source("process.stdout.write('serving v3\\n')\n")
      const later = new Date(Date.now() + 60_000)
      utimesSync(join(dir, 'src', 'server.ts'), later, later)
      expect(await npmStart()).toEqual({
        code: 0,
        stdout: 'serving v3\n',
        stderr: 'openbook: the sources are newer than dist/: building it (tsc -p tsconfig.build.json)\n',
      })
    },
    patience(120_000),
  )

  it(
    'sources that do not build, or no TypeScript to build them: refused in one line, no stack trace',
    async () => {
      source('const x: number = "not a number"\n')
      const broken = await npmStart()
      expect(broken.code).toBe(1)
      expect(broken.stdout).toBe('')
      expect(broken.stderr.split('\n').filter(Boolean).slice(1)).toEqual([
        expect.stringMatching(
          /^openbook: cannot build dist\/ from the sources: src\/server\.ts\(1,7\): error TS2322: .*; fix it, or run npm run build to see every error$/,
        ),
      ])

      rmSync(join(dir, 'node_modules'))
      rmSync(join(dir, 'dist'), { recursive: true })
      const missing = await npmStart()
      expect(missing).toEqual({
        code: 1,
        stdout: '',
        stderr:
          'openbook: dist/ is missing, and it cannot be built here: TypeScript is not installed (npm ci installs it; or build elsewhere with npm run build)\n',
      })
    },
    patience(120_000),
  )
})
