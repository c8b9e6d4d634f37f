import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from '../helpers/process.js'

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, stdio: 'pipe' }).toString().trim()

/**
 * The release a rolling upgrade (and its rollback) starts from: the latest release tag (`vX.Y.Z`,
 * CHANGELOG.md) in this checkout's history that is not the checked-out commit itself, so that each
 * release is tested against the one before it. Tagging a release moves it forward.
 */
function latestReleaseTag(): { readonly tag: string; readonly commit: string } {
  const head = git('rev-parse', 'HEAD')
  for (const tag of git('tag', '--merged', 'HEAD', '--sort=-v:refname', '--list', 'v[0-9]*').split('\n')) {
    if (!/^v\d+\.\d+\.\d+$/.test(tag)) continue
    const commit = git('rev-parse', `${tag}^{commit}`)
    if (commit !== head) return { tag, commit }
  }
  throw new Error(
    "no release tag (vX.Y.Z) in this checkout's history: make the release tags first (node scripts/release-tags.js)",
  )
}

const LATEST = latestReleaseTag()
export const PREVIOUS_RELEASE_TAG = LATEST.tag
export const PREVIOUS_RELEASE = LATEST.commit

export interface PreviousRelease {
  readonly root: string
  readonly tag: string
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
  return buildRelease(dir, PREVIOUS_RELEASE_TAG, 'previous-release')
}

/** A worktree of the release `tag` in `dir`/`name`, built as buildPreviousRelease builds its own. */
export function buildRelease(dir: string, tag: string, name = tag): PreviousRelease {
  let commit: string
  try {
    commit = git('rev-parse', `${tag}^{commit}`)
  } catch {
    throw new Error(
      `the release ${tag} is not in this checkout's history: make the release tags first (node scripts/release-tags.js)`,
    )
  }
  const root = join(dir, name)
  git('worktree', 'add', '--detach', '--force', root, commit)
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
      throw new Error(`the release ${tag} built no dist/server.js`)
  } catch (error) {
    remove()
    throw error
  }
  const latestVersion = Math.max(
    ...readdirSync(join(root, 'src/store/migrations'))
      .filter((file) => /^\d{3}_[a-z0-9_]+\.sql$/.test(file))
      .map((file) => Number(file.slice(0, 3))),
  )
  return { root, tag, commit, latestVersion, remove }
}
