/**
 * Preloaded into an openbook server by bench/yardstick.ts (`node --import ./bench/technique-off.mjs
 * dist/server.js`): BENCH_TECHNIQUE_OFF names one request-path technique, which the server then runs
 * without. It sets the switches the server declares for this (src/techniques.ts) before the
 * server's modules load; a switch the build no longer declares stops the server rather than
 * measure the technique on.
 */
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'

/** Per technique: the switches of src/techniques.ts that take it out. */
const OFF = {
  // The key lookup goes alone with BEGIN and is waited for; then the page, still by SQL-level
  // EXECUTE with literals of a statement PREPAREd once per connection: two round trips.
  'one-trip': { oneTrip: false },
  // The page by the extended protocol's named prepared statement (pg's `name`), as before the
  // one-message form: node-postgres waits for each statement's answer, so also two round trips.
  'sql-prepare': { oneTrip: false, sqlExecute: false },
  // Timestamps and dates written by the database with to_char (the JSON form's SQL), not as text
  // that Node rewrites.
  'text-timestamps': { textTimestamps: false },
  // The page's items written from the rows pg makes (a string per field, an object per row), not
  // from the bytes of the rows as they arrive.
  'row-bytes': { rowBytes: false },
}

const technique = process.env.BENCH_TECHNIQUE_OFF
if (technique) {
  const switches = OFF[technique]
  if (!switches) throw new Error(`BENCH_TECHNIQUE_OFF: unknown technique ${technique}`)
  const dist = dirname(process.argv[1] ?? '')
  const { techniques } = await import(pathToFileURL(join(dist, 'techniques.js')).href)
  for (const [name, value] of Object.entries(switches)) {
    if (typeof techniques?.[name] !== 'boolean')
      throw new Error(`technique switch ${technique}: dist/techniques.js declares no ${name}`)
    techniques[name] = value
  }
}
