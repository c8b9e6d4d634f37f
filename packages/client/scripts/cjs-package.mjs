// dist/cjs holds the CommonJS build (tsconfig.cjs.json): its package.json tells Node (and
// TypeScript) that the .js and .d.ts files there are CommonJS, in a package that is ESM.
import { writeFileSync } from 'node:fs'

writeFileSync(new URL('../dist/cjs/package.json', import.meta.url), '{ "type": "commonjs" }\n')
