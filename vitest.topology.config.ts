import { defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

/**
 * The files in vitest's order, then the Patroni file last: the others' timing checks never run
 * while it is starting or stopping a cluster, and their figures stay comparable from run to run.
 */
class PatroniLast extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const last = (spec: TestSpecification) => (spec.moduleId.endsWith('patroni.topology.ts') ? 1 : 0)
    return sorted.sort((a, b) => last(a) - last(b))
  }
}

/**
 * The topology test (npm run test:topology): each file's phases in order, on a loopback topology
 * it builds and removes itself (test/topology). Not part of `npm test`, whose pattern is *.test.ts.
 */
export default defineConfig({
  test: {
    include: ['test/topology/**/*.topology.ts'],
    pool: 'forks',
    fileParallelism: false,
    sequence: { sequencer: PatroniLast },
    testTimeout: 120_000,
    hookTimeout: 300_000,
    reporters: ['verbose'],
  },
})
