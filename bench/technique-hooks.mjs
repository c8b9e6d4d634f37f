/**
 * Module hooks of bench/technique-off.mjs: per technique, the edits of openbook's compiled modules
 * (dist/) that switch it off. Each edit names the text it replaces; a build where that text is not
 * found once exactly is refused, so that a switch never silently measures the technique on.
 */

/** Per technique: per module (the end of its path under dist/), [text, replacement] pairs. */
export const EDITS = {
  // The key lookup goes alone with BEGIN and is waited for; then the page, still by SQL-level
  // EXECUTE with literals of a statement PREPAREd once per connection: two round trips.
  'one-trip': {
    'plugins/auth.js': [['if (!sql.sendWithNext) {', 'if (true) {']],
    'store/postgres/connection.js': [
      [
        'if (namesKeyOrganization(params)) {',
        "if (namesKeyOrganization(params) || (mode.request && this.prepare !== 'off' && params.length > 0)) {",
      ],
    ],
  },
  // The page by the extended protocol's named prepared statement (pg's `name`), as before the
  // one-message form: node-postgres waits for each statement's answer, so also two round trips.
  'sql-prepare': {
    'plugins/auth.js': [['if (!sql.sendWithNext) {', 'if (true) {']],
  },
  // Timestamps and dates written by the database with to_char (the JSON form's SQL), not as text
  // that Node rewrites.
  'text-timestamps': {
    'queries/page-statement.js': [["type === 'timestamp' || type === 'date'", 'false']],
  },
}

let edits

export function initialize(data) {
  edits = EDITS[data.technique]
  if (!edits) throw new Error(`BENCH_TECHNIQUE_OFF: unknown technique ${data.technique}`)
}

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context)
  const module = Object.keys(edits).find((end) => url.endsWith(`/dist/${end}`))
  if (!module) return result
  // Checked to match once each by technique-off.mjs before the server started.
  let source = String(result.source)
  for (const [text, replacement] of edits[module]) source = source.replace(text, replacement)
  return { ...result, source }
}
