// `npm start`: the server of the current sources (scripts/current-dist.js builds dist/ when it is
// stale). The server then runs in this very process, so that the signals sent to `npm start`
// (which execs this script) reach it.
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { ROOT } from './build-inputs.js'
import { ensureCurrentDist } from './current-dist.js'

ensureCurrentDist()
await import(pathToFileURL(join(ROOT, 'dist', 'server.js')).href)
