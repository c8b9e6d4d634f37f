import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from '../helpers/process.js'

/**
 * The release a rolling upgrade starts from: the last commit before this release's first
 * migration (008), the first with the version rules (README, Upgrading). Moved forward when a
 * release adds a migration: to the last commit before that release's first one.
 */
export const PREVIOUS_RELEASE = '09cc911dddc14e303c759094f1e0d80361ae5cc8'

export interface PreviousRelease {
  readonly root: string
  readonly commit: string
  /** The highest migration it knows. */
  readonly latestVersion: number
  /** Unregisters the worktree (its folder goes with the run's directory). */
  remove(): void
}

/**
 * A git worktree of PREVIOUS_RELEASE in `dir`, built as `npm ci` builds it (tsc, then the
 * migrations beside the output), on this checkout's node_modules: the server's dependencies have
 * not changed since. Needs the repository's history (a clone, not an export).
 */
export function buildPreviousRelease(dir: string): PreviousRelease {
  const root = join(dir, 'previous-release')
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, stdio: 'pipe' }).toString()
  try {
    git('cat-file', '-e', `${PREVIOUS_RELEASE}^{commit}`)
  } catch {
    throw new Error(
      `the previous release ${PREVIOUS_RELEASE.slice(0, 7)} is not in this checkout's history: run the topology test in a clone of the repository`,
    )
  }
  git('worktree', 'add', '--detach', '--force', root, PREVIOUS_RELEASE)
  const remove = () => {
    try {
      git('worktree', 'remove', '--force', root)
    } catch {
      git('worktree', 'prune')
    }
  }
  try {
    symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'), 'dir')
    execFileSync(
      process.execPath,
      [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: root,
        stdio: 'pipe',
      },
    )
    execFileSync(process.execPath, ['scripts/copy-migrations.js'], { cwd: root, stdio: 'pipe' })
    if (!existsSync(join(root, 'dist/server.js')))
      throw new Error('the previous release built no dist/server.js')
  } catch (error) {
    remove()
    throw error
  }
  const latestVersion = Math.max(
    ...readdirSync(join(root, 'src/store/migrations'))
      .filter((file) => /^\d{3}_[a-z0-9_]+\.sql$/.test(file))
      .map((file) => Number(file.slice(0, 3))),
  )
  return { root, commit: PREVIOUS_RELEASE, latestVersion, remove }
}
