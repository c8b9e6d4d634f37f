/**
 * The embedded store's demo pages at saturation, this build against another (a worktree of a
 * commit, built), each in a fresh DATA_DIR, in rounds that take turns (the order flips each
 * round): req/s of each page and the server's peak RSS.
 *
 *   npm run build && node --import tsx bench/embedded-against.ts DIR [--rounds 3] [--seconds 5]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { measureEmbedded } from './embedded.js'
import { runFromRoot } from './paths.js'

runFromRoot()
const { values, positionals } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '5' } },
  allowPositionals: true,
})
const against = positionals[0]
if (!against) throw new Error('usage: bench/embedded-against.ts DIR (a built worktree of another commit)')
const builds = [
  { name: 'this', dir: '.' },
  { name: 'against', dir: against },
]
const settings = { duration: Number(values.seconds), rounds: 1, warmup: 1, connections: 16, poolSize: 10 }
const rps = new Map<string, number[]>()
const rss = new Map<string, number[]>()
const add = (map: Map<string, number[]>, key: string, value: number) =>
  map.set(key, [...(map.get(key) ?? []), value])
for (let round = 0; round < Number(values.rounds); round++) {
  for (const build of round % 2 ? [...builds].reverse() : builds) {
    const work = mkdtempSync(join(tmpdir(), 'openbook-embedded-'))
    let stop: (() => Promise<void>) | undefined
    try {
      const result = await measureEmbedded(
        work,
        settings,
        () => undefined,
        (stopServer) => {
          stop = stopServer
        },
        build.dir,
      )
      for (const mix of result.mixes) add(rps, `${mix.id} ${build.name}`, Math.round(mix.result.rps))
      add(rss, build.name, Math.round(result.rssMb))
      console.log(
        `round ${round + 1} ${build.name}: ${result.mixes.map((mix) => `${mix.id} ${Math.round(mix.result.rps)}/s`).join(', ')}, peak RSS ${Math.round(result.rssMb)} MB`,
      )
    } finally {
      await stop?.().catch(() => undefined)
      rmSync(work, { recursive: true, force: true })
    }
  }
}
const range = (all: number[] = []) => `${Math.min(...all)}-${Math.max(...all)}`
console.log('\n| page | this, req/s | against, req/s |\n| --- | ---: | ---: |')
for (const id of new Set([...rps.keys()].map((key) => key.split(' ')[0])))
  console.log(`| ${id} | ${range(rps.get(`${id} this`))} | ${range(rps.get(`${id} against`))} |`)
console.log(`| peak RSS, MB | ${range(rss.get('this'))} | ${range(rss.get('against'))} |`)
