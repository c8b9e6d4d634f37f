#!/usr/bin/env node
// The command line of the current sources: dist/ is built first when it is stale, as `npm start`
// does (scripts/current-dist.js).
import { ensureCurrentDist } from '../scripts/current-dist.js'

ensureCurrentDist()
await import('../dist/cli/index.js')
