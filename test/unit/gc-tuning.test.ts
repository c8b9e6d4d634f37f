import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const MODULE = fileURLToPath(new URL('../../src/gc-tuning.ts', import.meta.url))

/** What a fresh Node process writes to stderr when it runs `code` (an ES module, TypeScript loaded by tsx). */
function stderrOf(code: string): string {
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    encoding: 'utf8',
  })
  expect(result.status).toBe(0)
  return result.stderr
}

describe('the garbage-collector setting of the server', () => {
  it('is a flag this V8 knows: a misspelled one would be ignored with only a line on stderr', () => {
    // The control: V8 reports a flag it does not know, and goes on.
    expect(
      stderrOf("(await import('node:v8')).setFlagsFromString('--no-allocation-site-pretenurin')"),
    ).toMatch(/unrecognized flag/)
    expect(stderrOf(`(await import(${JSON.stringify(MODULE)})).tuneGarbageCollector()`)).toBe('')
  })
})
