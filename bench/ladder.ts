/**
 * pgbench scripts of one request (bench/yardstick.ts): the ceiling (`-M prepared` on the statements
 * openbook runs) and openbook's own messages, whole and without one part each. Pure text from the
 * statements the service sends (bench/sql.ts `captureStatements`); unit-tested.
 */
import { createHash } from 'node:crypto'
import { executeText, prepareOnServerText, prepareText } from '../src/store/one-trip.js'
import { readerPreamble } from '../src/store/reader-settings.js'
import { KEY_ORGANIZATION } from '../src/store/types.js'
import type { RequestStatements } from './sql.js'

/** The reader's settings as openbook makes them per transaction (`readerPreamble`), by name. */
export function readerSettings(): Record<string, string> {
  const settings: Record<string, string> = {}
  for (const [, name = '', value = ''] of readerPreamble(true, 5_000).matchAll(
    /set_config\('([^']+)', '([^']*)', true\)/g,
  )) {
    // Per session, a read-only transaction is the sessions' default.
    settings[name === 'transaction_read_only' ? 'default_transaction_read_only' : name] = value
  }
  return settings
}

export interface PgbenchVariant {
  readonly name: string
  readonly what: string
  readonly protocol: 'simple' | 'prepared'
  /** Settings per session: the reader's, and with `org` the organization too. */
  readonly session?: 'reader' | 'org'
  readonly script: (s: RequestStatements, orgId: string) => string
}

/** The page's statement name, one per text (`prepareOnServerText` keeps one quoted text per name). */
const pageName = (s: RequestStatements) =>
  `bench_page_${createHash('sha256').update(s.page.text).digest('hex').slice(0, 16)}`
const join_ = (statements: readonly string[]) => `${statements.join(' \\; ')};`
const opening = () => ['BEGIN', readerPreamble(true, 5_000)]
/** PREPARE of the page once per pgbench client, as openbook does once per connection. */
const prepareOnce = (s: RequestStatements) =>
  ['\\if :prepared = 0', `${prepareText(pageName(s), s.page.text)};`, '\\set prepared 1', '\\endif'].join(
    '\n',
  )
/** The key's hash, written into the lookup as a literal where it goes alone (queries/api-keys.ts). */
const KEY_HASH_LITERAL = /'([0-9a-f]{64})'/
/** The key lookup as a statement of one parameter, the hash. */
const lookupWithParam = (s: RequestStatements) => {
  const text = s.authenticate.text.replace(KEY_HASH_LITERAL, () => '$1::text')
  if (text === s.authenticate.text) throw new Error('no key hash in the key lookup')
  return text
}
const hashOf = (s: RequestStatements) => KEY_HASH_LITERAL.exec(s.authenticate.text)?.[1] ?? ''
/** PREPARE of the settings, the key lookup and the page once per pgbench client. */
const prepareAllOnce = (s: RequestStatements) =>
  [
    '\\if :prepared = 0',
    `${prepareText('bench_settings', readerPreamble(true, 5_000))};`,
    `${prepareText('bench_lookup', lookupWithParam(s))};`,
    `${prepareText(pageName(s), s.page.text)};`,
    '\\set prepared 1',
    '\\endif',
  ].join('\n')
const executeAll = (s: RequestStatements) => [
  'EXECUTE bench_settings',
  executeText('bench_lookup', [hashOf(s)]),
  executeKeyOrg(s),
]
/** EXECUTE of the page, the organization read from the setting the key lookup made (as openbook). */
const executeKeyOrg = (s: RequestStatements) =>
  executeText(pageName(s), [KEY_ORGANIZATION, ...s.page.params.slice(1)])
const lines = (...parts: string[]) => `${parts.join('\n')}\n`

export const PGBENCH: readonly PgbenchVariant[] = [
  {
    name: 'pgb-prepared',
    what: 'the ceiling: `-M prepared`, the key lookup and the page as two statements, settings and organization per session',
    protocol: 'prepared',
    session: 'org',
    script: (s) =>
      lines(`${s.authenticate.text};`, `${s.page.text.replace(/\$(\d+)/g, (_, n: string) => `:p${n}`)};`),
  },
  {
    name: 'pgb-bare',
    what: 'the same two statements in one simple-protocol message (EXECUTE with literals), settings per session',
    protocol: 'simple',
    session: 'org',
    script: (s) =>
      lines(prepareOnce(s), join_([s.authenticate.text, executeText(pageName(s), s.page.params)])),
  },
  {
    name: 'pgb-openbook',
    what: "openbook's messages: BEGIN, settings, key lookup and EXECUTE in one; then COMMIT",
    protocol: 'simple',
    script: (s) =>
      lines(prepareOnce(s), join_([...opening(), s.authenticate.text, executeKeyOrg(s)]), 'COMMIT;'),
  },
  {
    name: 'pgb-no-begin-commit',
    what: "openbook's message without BEGIN and without the COMMIT message (one implicit transaction)",
    protocol: 'simple',
    script: (s) =>
      lines(prepareOnce(s), join_([readerPreamble(true, 5_000), s.authenticate.text, executeKeyOrg(s)])),
  },
  {
    name: 'pgb-no-settings',
    what: "openbook's messages without the settings' SELECT (made per session instead)",
    protocol: 'simple',
    session: 'reader',
    script: (s) => lines(prepareOnce(s), join_(['BEGIN', s.authenticate.text, executeKeyOrg(s)]), 'COMMIT;'),
  },
  {
    name: 'pgb-no-lookup',
    what: "openbook's messages with the key lookup replaced by set_config of the organization",
    protocol: 'simple',
    script: (s, orgId) =>
      lines(
        prepareOnce(s),
        join_([...opening(), `SELECT set_config('openbook.org_id', '${orgId}', true)`, executeKeyOrg(s)]),
        'COMMIT;',
      ),
  },
  {
    name: 'pgb-executes',
    what: "openbook's messages until the implicit transaction: BEGIN, the settings, the key lookup and the page EXECUTEd (prepared once per client); then COMMIT",
    protocol: 'simple',
    script: (s) => lines(prepareAllOnce(s), join_(['BEGIN', ...executeAll(s)]), 'COMMIT;'),
  },
  {
    name: 'pgb-executes-implicit',
    what: "openbook's message now (`DATABASE_PREPARED_STATEMENTS=on`): the same, one message as its own implicit transaction (no BEGIN, no COMMIT message)",
    protocol: 'simple',
    script: (s) => lines(prepareAllOnce(s), join_(executeAll(s))),
  },
  {
    name: 'pgb-implicit-no-settings',
    what: "openbook's message now without the settings' EXECUTE (made per session instead)",
    protocol: 'simple',
    session: 'reader',
    script: (s) => lines(prepareAllOnce(s), join_(executeAll(s).slice(1))),
  },
  {
    name: 'pgb-implicit-no-lookup',
    what: "openbook's message now with the key lookup's EXECUTE replaced by set_config of the organization",
    protocol: 'simple',
    script: (s, orgId) =>
      lines(
        prepareAllOnce(s),
        join_([
          'EXECUTE bench_settings',
          `SELECT set_config('openbook.org_id', '${orgId}', true)`,
          executeKeyOrg(s),
        ]),
      ),
  },
  {
    name: 'pgb-pooler',
    what: "openbook's message with `DATABASE_PREPARED_STATEMENTS=pooler` (openbook_prepare in each), its own implicit transaction",
    protocol: 'simple',
    script: (s) =>
      lines(
        join_([
          readerPreamble(true, 5_000),
          prepareOnServerText(pageName(s), s.page.text, false),
          s.authenticate.text,
          executeKeyOrg(s),
        ]),
      ),
  },
]

/** How pgbench runs one variant's script for a request: protocol, session settings, variables. */
export interface PgbenchRun {
  readonly script: string
  readonly protocol: 'simple' | 'prepared'
  readonly sessionSettings?: Readonly<Record<string, string>>
  readonly variables: Readonly<Record<string, string>>
}

/** `variant` for the request of `statements` by a key of `orgId`. */
export function pgbenchRun(
  variant: PgbenchVariant,
  statements: RequestStatements,
  orgId: string,
): PgbenchRun {
  const reader = readerSettings()
  const session =
    variant.session === 'org'
      ? { ...reader, 'openbook.org_id': orgId }
      : variant.session === 'reader'
        ? reader
        : undefined
  return {
    script: variant.script(statements, orgId),
    protocol: variant.protocol,
    ...(session ? { sessionSettings: session } : {}),
    // The page's parameters as variables where pgbench binds them; else a client's mark of its PREPAREs.
    variables:
      variant.protocol === 'prepared'
        ? Object.fromEntries(statements.page.params.map((value, i) => [`p${i + 1}`, String(value)]))
        : { prepared: '0' },
  }
}

/** The ceiling: `pgb-prepared`. */
export const CEILING = PGBENCH[0] as PgbenchVariant

const variant = (name: string) => {
  const found = PGBENCH.find((v) => v.name === name)
  if (!found) throw new Error(`no pgbench script ${name}`)
  return found
}

/** openbook's message as it goes now: `pgb-executes-implicit`. */
export const MESSAGE = variant('pgb-executes-implicit')

/**
 * What `--paced-ladder` runs at openbook's rate: the ceiling, openbook's message, and the parts
 * between them one at a time (the settings, the key lookup, the simple protocol's EXECUTE).
 */
export const PACED_LADDER: readonly PgbenchVariant[] = [
  CEILING,
  MESSAGE,
  variant('pgb-implicit-no-settings'),
  variant('pgb-implicit-no-lookup'),
  variant('pgb-bare'),
]
