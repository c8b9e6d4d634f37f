import { cleanEnv, ROOT, spawnCollecting } from '../helpers/process.js'

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs the real `openbook` binary in a subprocess (of this checkout, or of `root`'s). */
export function openbook(
  args: readonly string[],
  env: Record<string, string | undefined>,
  input?: string,
  root: string = ROOT,
): Promise<CliResult> {
  const run = spawnCollecting('node', ['bin/openbook.js', ...args], { cwd: root, env: cleanEnv(env) })
  run.child.stdin.end(input ?? '')
  return run.closed.then((code) => ({ code, stdout: run.stdout(), stderr: run.stderr() }))
}

export function json<T = Record<string, unknown>>(result: CliResult): T {
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr}`)
  return JSON.parse(result.stdout) as T
}
