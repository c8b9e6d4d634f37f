import { defineConfig } from 'vitest/config'

/** The benchmark's own unit tests (pure logic, no database): `npm test -w @openbook/bench`. */
export default defineConfig({
  test: { include: ['test/**/*.test.ts'] },
})
