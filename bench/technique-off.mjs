/**
 * Preloaded into an openbook server by bench/techniques.ts (`node --import ./bench/technique-off.mjs
 * dist/server.js`): BENCH_TECHNIQUE_OFF names one request-path technique, which the server then runs
 * without. The product has no such switch; the compiled modules are edited as they load
 * (bench/technique-hooks.mjs). Every module to edit is checked first: one that is missing, or whose
 * text no longer matches once exactly, stops the server rather than measure the technique on.
 */
import { readFileSync } from 'node:fs'
import { register } from 'node:module'
import { dirname, join } from 'node:path'
import { EDITS } from './technique-hooks.mjs'

const technique = process.env.BENCH_TECHNIQUE_OFF
if (technique) {
  const edits = EDITS[technique]
  if (!edits) throw new Error(`BENCH_TECHNIQUE_OFF: unknown technique ${technique}`)
  const dist = dirname(process.argv[1] ?? '')
  for (const [module, pairs] of Object.entries(edits)) {
    const source = readFileSync(join(dist, module), 'utf8')
    for (const [text] of pairs) {
      const found = source.split(text).length - 1
      if (found !== 1)
        throw new Error(`technique switch ${technique}: ${module} holds ${found} times: ${text}`)
    }
  }
  register('./technique-hooks.mjs', import.meta.url, { data: { technique } })
}
