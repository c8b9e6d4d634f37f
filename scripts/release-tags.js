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

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const { tag, commit } of releases()) {
    const current = tagged(tag)
    if (current === commit) continue
    if (current !== undefined) {
      console.error(`release-tags: ${tag} names ${current}, but scripts/releases.txt says ${commit}`)
      process.exit(1)
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
    console.log(`release-tags: made ${tag}`)
  }
}
