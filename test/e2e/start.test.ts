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
 * `npm start` and `openbook` after a `git pull`: they run the current sources. A project of one
 * or two source files with the repository's own `start` script, scripts/ and bin/ stands in for
 * the repository, so that building it costs a second and the tests' own dist/ is never rebuilt
 * under them.
 */
const dir = mkdtempSync(join(tmpdir(), 'openbook-start-'))
const cliDir = mkdtempSync(join(tmpdir(), 'openbook-bin-'))
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
  rmSync(cliDir, { recursive: true, force: true })
})

const realPackage = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>
}

function setUp(dir: string): void {
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'start-fixture',
      private: true,
      type: 'module',
      scripts: { start: realPackage.scripts.start },
    }),
  )
  for (const file of ['start.js', 'current-dist.js', 'build-inputs.js', 'copy-migrations.js']) {
    cpSync(join(ROOT, 'scripts', file), join(dir, 'scripts', file))
  }
  cpSync(join(ROOT, 'bin', 'openbook.js'), join(dir, 'bin', 'openbook.js'))
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

function npmStart(
  env: Record<string, string | undefined> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const run = spawnCollecting('npm', ['start', '--silent'], {
    cwd: dir,
    env: cleanEnv({ OPENBOOK_BUILD: 'auto', MALLOC_ARENA_MAX: undefined, ...env }),
  })
  run.child.stdin.end()
  return run.closed.then((code) => ({ code, stdout: run.stdout(), stderr: run.stderr() }))
}

describe('npm start serves the current sources', () => {
  it(
    'dist/ missing: built, then served; current: served as it is; sources changed (a git pull): built again',
    async () => {
      setUp(dir)
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
    "caps glibc's malloc arenas at 2 unless the environment says otherwise",
    async () => {
      // Each thread's own arena grows apart: the embedded store's thread and V8's and libuv's held
      // 96-109 MB of arenas under load, 6-7 MB with two (bench/RESULTS.md, embedded memory).
      source("process.stdout.write(String(process.env.MALLOC_ARENA_MAX) + '\\n')\n")
      expect(await npmStart()).toMatchObject({ code: 0, stdout: '2\n' })
      expect(await npmStart({ MALLOC_ARENA_MAX: '8' })).toMatchObject({ code: 0, stdout: '8\n' })
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

describe('openbook (bin/openbook.js) runs the current sources', () => {
  const cli = (text: string) => {
    mkdirSync(join(cliDir, 'src', 'cli'), { recursive: true })
    writeFileSync(join(cliDir, 'src', 'cli', 'index.ts'), text)
  }
  function openbook(build = 'auto'): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const run = spawnCollecting('node', ['bin/openbook.js'], {
      cwd: cliDir,
      env: cleanEnv({ OPENBOOK_BUILD: build }),
    })
    run.child.stdin.end()
    return run.closed.then((code) => ({ code, stdout: run.stdout(), stderr: run.stderr() }))
  }

  it(
    'dist/ missing or stale: built first; several at once build it once; sources that do not build: refused',
    async () => {
      setUp(cliDir)
      writeFileSync(join(cliDir, 'src', 'server.ts'), 'export {}\n')
      cli("process.stdout.write('cli v1\\n')\n")
      expect(await openbook()).toEqual({
        code: 0,
        stdout: 'cli v1\n',
        stderr: 'openbook: dist/ is missing: building it (tsc -p tsconfig.build.json)\n',
      })
      expect(await openbook()).toEqual({ code: 0, stdout: 'cli v1\n', stderr: '' })

      // An edit (a new command): the next commands, started together, build it once and run it.
      cli("process.stdout.write('cli v2\\n')\n")
      const together = await Promise.all([openbook(), openbook(), openbook()])
      expect(together.map((run) => [run.code, run.stdout])).toEqual([
        [0, 'cli v2\n'],
        [0, 'cli v2\n'],
        [0, 'cli v2\n'],
      ])
      expect(together.map((run) => run.stderr).filter(Boolean)).toEqual([
        'openbook: the sources changed since dist/ was built: building it (tsc -p tsconfig.build.json)\n',
      ])

      // OPENBOOK_BUILD=never (a deployment built elsewhere, the tests' own run): dist/ as it is.
      cli("process.stdout.write('cli v3\\n')\n")
      expect(await openbook('never')).toEqual({ code: 0, stdout: 'cli v2\n', stderr: '' })

      cli('const x: number = "not a number"\n')
      const broken = await openbook()
      expect(broken.code).toBe(1)
      expect(broken.stdout).toBe('')
      expect(broken.stderr.split('\n').filter(Boolean).slice(1)).toEqual([
        expect.stringMatching(
          /^openbook: cannot build dist\/ from the sources: src\/cli\/index\.ts\(1,7\): error TS2322: .*; fix it, or run npm run build to see every error$/,
        ),
      ])
    },
    patience(120_000),
  )
})
