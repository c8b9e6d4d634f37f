import { fileURLToPath } from 'node:url'

/**
 * The repository's root. The benchmark runs from there whichever directory npm starts it in
 * (`npm run bench` at the root, or in this workspace): it spawns `bench/…` scripts, reads the
 * build in `dist/` and writes `bench/RESULTS.md`, all by paths relative to the root.
 */
export const ROOT = fileURLToPath(new URL('..', import.meta.url))

export function runFromRoot(): void {
  process.chdir(ROOT)
}
