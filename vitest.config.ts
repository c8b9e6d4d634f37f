import { configDefaults, defineConfig } from 'vitest/config'
import { patience } from './packages/client/test/helpers/patience.js'

/**
 * Two projects; `vitest run` (in `npm test`) runs both.
 *
 * - unit (`npm run test:unit`, seconds): pure logic, no database, no server, no build, no global
 *   set-up. A test that needs any of them belongs to integration.
 * - integration: everything else. Its global set-up builds dist/ when it is not of the current
 *   sources (the CLI and end-to-end tests run the binaries), migrates one template database per
 *   store kind that the test stores are copied from, and finds PostgreSQL (test/helpers).
 */
const UNIT = [
  'test/unit/**/*.test.ts',
  // The docs' links and rules, and the errors page's table: files only.
  'test/docs/links.test.ts',
  'test/docs/errors-table.test.ts',
  'bench/test/**/*.test.ts',
  // The client's tests of pure logic (a fake fetch, in-memory pages).
  'packages/client/test/client.test.ts',
  'packages/client/test/paginate.test.ts',
]

export default defineConfig({
  test: {
    pool: 'forks',
    // Vitest's default on 2 cores is one file at a time. The integration files spend much of their
    // time waiting on child processes and PostgreSQL: on 2 cores, npm test took 5 min 16 s with two
    // at a time (1.5 cores busy on average) and 4 min 42 s with three (README).
    maxWorkers: 3,
    // Limits end a test that hangs; they stretch with the load (patience.ts), and a set-up (a
    // store, a server) gets two minutes on an idle machine.
    testTimeout: patience(30_000),
    // The binaries the tests spawn run the dist/ that the global set-up built for the run, even
    // when the sources change under a long run (scripts/current-dist.js).
    env: { OPENBOOK_BUILD: 'never' },
    hookTimeout: patience(120_000),
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts', 'packages/client/test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...UNIT],
          globalSetup: ['test/helpers/global-setup.ts'],
        },
      },
    ],
  },
})
