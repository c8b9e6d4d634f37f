import { defineConfig } from 'vitest/config'

/**
 * The topology test (npm run test:topology): one file, its phases in order, on a loopback topology
 * it builds and removes itself (test/topology). Not part of `npm test`, whose pattern is *.test.ts.
 */
export default defineConfig({
  test: {
    include: ['test/topology/**/*.topology.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 300_000,
    reporters: ['verbose'],
  },
})
