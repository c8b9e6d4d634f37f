#!/usr/bin/env node
// Makes the release tags of scripts/releases.txt that this clone lacks (a clone of one branch
// carries none), as annotated tags on their commits, and refuses a tag that names another commit.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const git = (...args) =>
  execFileSync('git', args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    .toString()
    .trim()

export function releases() {
  return readFileSync(join(root, 'scripts', 'releases.txt'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .map((line) => {
      const [tag, commit] = line.trim().split(/\s+/)
      return { tag, commit }
    })
}

function tagged(tag) {
  try {
    return git('rev-parse', '--verify', '--quiet', `refs/tags/${tag}^{commit}`)
  } catch {
    return undefined
  }
}

/**
 * Makes the tags this clone lacks. Throws when a tag names another commit than the list's, or a
 * listed commit is missing (a shallow clone): both need a person, not a retag.
 */
export function makeReleaseTags(log = (line) => console.log(line)) {
  for (const { tag, commit } of releases()) {
    const current = tagged(tag)
    if (current === commit) continue
    if (current !== undefined) {
      throw new Error(`release-tags: ${tag} names ${current}, but scripts/releases.txt says ${commit}`)
    }
    git(
      '-c',
      'user.name=openbook releases',
      '-c',
      'user.email=releases@openbook.invalid',
      'tag',
      '--annotate',
      '--message',
      `openbook ${tag.slice(1)}`,
      tag,
      commit,
    )
    log(`release-tags: made ${tag}`)
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    makeReleaseTags()
  } catch (error) {
    console.error(error.message)
    process.exit(1)
  }
}
