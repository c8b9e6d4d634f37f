import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { AuthenticationError, BadRequestError, OpenbookError } from '../errors.js'
import { runSync, type SyncProgress, type SyncResource, SyncUsageError } from './sync.js'

const USAGE = `Usage: openbook-sync customers|appointments (--key-file FILE | --key-env NAME) --base-url URL (--out FILE.ndjson|FILE.csv | --pg postgres://…) [options]

Copies an organization's customers or appointments from the openbook public API into a file or
a PostgreSQL table, without missing a row. A rerun after an interruption (even kill -9) goes on
where it stopped: no row twice, none skipped. When a pass completes, the ids the previous complete
pass had and this one has not get a tombstone: {"id":…,"deletedAt":…} in NDJSON, a row with only
id and deletedAt in CSV, deleted_at set in PostgreSQL. An interrupted pass marks none.

Options:
  --key-file FILE     read the API key from FILE (the key is never printed)
  --key-env NAME      read the API key from the environment variable NAME
  --base-url URL      the API's address, e.g. http://127.0.0.1:3000
  --out FILE          .ndjson (or .jsonl) or .csv; appended to, pass after pass
  --pg URL            postgres://… : upsert into a table it creates (needs the pg package):
                      org_id, id (the primary key), data jsonb, synced_at, deleted_at, sync_pass
  --table NAME        with --pg: the table (default openbook_customers_ORG /
                      openbook_appointments_ORG, ORG the key's organization)
  --org ID            the key's organization, needed only when it has no active appointment
                      (the API names the organization in appointments only); else checked
  --since ISO         appointments: start time at or after (inclusive)
  --until ISO         appointments: start time at or before (inclusive)
  --state FILE        the state file (default: FILE.state.json next to --out;
                      with --pg, openbook-sync.DATABASE.TABLE.state.json here);
                      it records the organization: another organization's key is refused
  --page-size N       rows per request, 1 to 99 (default 50)
  --timeout-ms N      time-out of one request (default 30000)
  --json              print a JSON summary on standard output
  -h, --help          this text

One request at a time (the contract asks for at most two). Progress goes to standard error: a
bar with rate and ETA on a terminal, plain lines otherwise.
Exit codes: 0 the pass completed; 1 it failed and a rerun resumes it; 2 a usage or key error.`

function fail(code: 1 | 2, message: string): never {
  process.stderr.write(`openbook-sync: ${message}\n`)
  process.exit(code)
}

function readKey(values: { 'key-file'?: string | undefined; 'key-env'?: string | undefined }): string {
  if (values['key-file'] && values['key-env']) fail(2, 'give --key-file or --key-env, not both')
  if (values['key-file']) {
    try {
      return readFileSync(values['key-file'], 'utf8').trim()
    } catch (error) {
      fail(2, `cannot read --key-file: ${(error as NodeJS.ErrnoException).code ?? 'error'}`)
    }
  }
  if (values['key-env']) {
    const key = process.env[values['key-env']]
    if (!key) fail(2, `the environment variable ${values['key-env']} is not set`)
    return key.trim()
  }
  return fail(2, '--key-file or --key-env is required')
}

function number(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  if (!/^\d{1,9}$/.test(text)) fail(2, `--${name} must be a whole number`)
  return Number(text)
}

/** A bar with rate and ETA on a terminal; a line every few seconds otherwise. */
function progressReporter(resource: string): { update(progress: SyncProgress): void; end(): void } {
  const started = Date.now()
  let lastLine = 0
  let startRows: number | undefined
  const tty = process.stderr.isTTY === true
  const describe = ({ rows, total }: SyncProgress) => {
    startRows ??= rows
    const seconds = (Date.now() - started) / 1000
    const rate = seconds > 0 ? (rows - startRows) / seconds : 0
    const left = Math.max(0, total - rows)
    const eta = rate > 0 ? `${Math.ceil(left / rate)}s` : '?'
    return { rate: rate.toFixed(0), eta, fraction: total > 0 ? Math.min(1, rows / total) : 1 }
  }
  return {
    update(progress) {
      const { rate, eta, fraction } = describe(progress)
      if (tty) {
        const width = 30
        const filled = Math.round(fraction * width)
        process.stderr.write(
          `\r${resource} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${progress.rows}/${progress.total} ${rate} rows/s ETA ${eta}  `,
        )
      } else if (Date.now() - lastLine >= 2_000 || progress.rows >= progress.total) {
        lastLine = Date.now()
        process.stderr.write(
          `${resource}: ${progress.rows}/${progress.total} rows, ${rate} rows/s, ETA ${eta}\n`,
        )
      }
    },
    end() {
      if (tty) process.stderr.write('\n')
    },
  }
}

async function main(): Promise<void> {
  let parsed: ReturnType<typeof parse>
  function parse() {
    return parseArgs({
      allowPositionals: true,
      options: {
        'key-file': { type: 'string' },
        'key-env': { type: 'string' },
        'base-url': { type: 'string' },
        out: { type: 'string' },
        pg: { type: 'string' },
        table: { type: 'string' },
        org: { type: 'string' },
        since: { type: 'string' },
        until: { type: 'string' },
        state: { type: 'string' },
        'page-size': { type: 'string' },
        'timeout-ms': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    })
  }
  try {
    parsed = parse()
  } catch (error) {
    fail(2, `${(error as Error).message}\n\n${USAGE}`)
  }
  const { values, positionals } = parsed
  if (values.help) {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  const resource = positionals[0]
  if (positionals.length !== 1 || (resource !== 'customers' && resource !== 'appointments'))
    fail(2, `give one resource: customers or appointments\n\n${USAGE}`)
  if (!values['base-url']) fail(2, '--base-url is required')
  if (values.out && values.pg) fail(2, 'give --out or --pg, not both')
  if (!values.out && !values.pg) fail(2, '--out or --pg is required')
  if (values.table && !values.pg) fail(2, '--table applies to --pg only')
  const apiKey = readKey(values)
  const progress = progressReporter(resource)
  const controller = new AbortController()
  process.once('SIGINT', () => controller.abort(new Error('interrupted')))
  process.once('SIGTERM', () => controller.abort(new Error('terminated')))
  try {
    const common = {
      resource: resource as SyncResource,
      apiKey,
      baseUrl: values['base-url'],
      org: values.org,
      since: values.since,
      until: values.until,
      statePath: values.state,
      pageSize: number('page-size', values['page-size']),
      timeoutMs: number('timeout-ms', values['timeout-ms']),
      signal: controller.signal,
      onProgress: (p: SyncProgress) => progress.update(p),
    }
    const summary = values.pg
      ? await (await import('./pg.js')).runPgSync({ ...common, pg: values.pg, table: values.table })
      : await runSync({ ...common, out: values.out ?? '' })
    progress.end()
    if (values.json) process.stdout.write(`${JSON.stringify(summary)}\n`)
    else
      process.stderr.write(
        `${resource}: pass ${summary.pass} complete, ${summary.rows} rows, ${summary.tombstones} tombstones, ` +
          `${summary.requests} requests (${summary.rereads} re-reads, ${summary.retries} retries) into ` +
          `${summary.format === 'pg' ? 'table ' : ''}${summary.out}\n`,
      )
  } catch (error) {
    progress.end()
    if (error instanceof Error && error.name === 'PgTargetError') fail(2, error.message)
    if (error instanceof SyncUsageError || (error instanceof TypeError && !(error instanceof OpenbookError)))
      fail(2, error.message)
    if (error instanceof RangeError) fail(2, error.message)
    if (error instanceof AuthenticationError || error instanceof BadRequestError)
      fail(
        2,
        `${error.message} (${error.code ?? error.status}${error.requestId ? `, request ${error.requestId}` : ''})`,
      )
    if (error instanceof OpenbookError)
      fail(1, `${error.message}${error.requestId ? ` (request ${error.requestId})` : ''}; rerun to resume`)
    if (controller.signal.aborted) fail(1, `${(error as Error).message}; rerun to resume`)
    fail(1, `${(error as Error).message ?? String(error)}; rerun to resume`)
  }
}

await main()
