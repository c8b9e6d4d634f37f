import { spawn } from 'node:child_process'
import { cleanEnv, ROOT } from '../helpers/process.js'

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
  return new Promise((resolve, reject) => {
    const child = spawn('node', ['bin/openbook.js', ...args], {
      cwd: root,
      env: cleanEnv(env),
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(input ?? '')
  })
}

export function json<T = Record<string, unknown>>(result: CliResult): T {
  if (result.code !== 0) throw new Error(`exit ${result.code}: ${result.stderr}`)
  return JSON.parse(result.stdout) as T
}
