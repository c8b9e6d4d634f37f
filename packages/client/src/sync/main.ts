import { readFileSync, statSync } from 'node:fs'
import { parseArgs } from 'node:util'
import {
  ApiError,
  AuthenticationError,
  BadRequestError,
  KeyExpiredError,
  KeyRevokedError,
  OpenbookError,
  UsageError,
} from '../errors.js'
import type { ClientEvent } from '../transport.js'
import { SyncBusyError, SyncTargetError, SyncUsageError } from './engine/errors.js'
import type { SyncProgress, SyncResource } from './engine/options.js'
import { runSync } from './targets/file.js'

const USAGE = `Usage: openbook-sync customers|appointments (--key-file FILE | --key-env NAME) --base-url URL (--out FILE.ndjson|FILE.csv | --pg postgres://…) [options]

Copies an organization's customers or appointments from the openbook public API into a file or
a PostgreSQL table, without missing a row. A rerun after an interruption (even kill -9) goes on
where it stopped: no row twice, none skipped. When a pass completes, the ids the previous complete
pass had and this one has not are marked deleted ({"id":…,"deletedAt":…} in NDJSON, a row with
only id and deletedAt in CSV, deleted_at set in PostgreSQL) only when that is certain: when the
list did not change while the pass read it (one request), else the next pass checks them again.
An interrupted pass marks none. Appointments that left the window are marked left-window
({"id":…,"leftWindowAt":…}, left_window_at), never deleted.

Options:
  --key-file FILE     read the API key from FILE (the key is never printed)
  --key-env NAME      read the API key from the environment variable NAME
  --base-url URL      the API's address, e.g. http://127.0.0.1:3000
  --out FILE          .ndjson (or .jsonl) or .csv; appended to, pass after pass
  --pg URL            postgres://… : upsert into a table it creates (needs the pg package):
                      org_id, id (the primary key), data jsonb, synced_at, deleted_at, sync_pass
  --table NAME        with --pg: the table (default openbook_customers_ORG /
                      openbook_appointments_ORG, ORG the key's organization); several
                      organizations may share one, each with its own state
  --org ID            the organization the key must be of (the API names it): checked
  --since ISO         appointments: start time at or after (inclusive)
  --until ISO         appointments: start time at or before (inclusive)
  --window A..B       appointments: a rolling window on the start time, from now: -90d..+30d
                      (days d or hours h). Each pass reads the window of the day; rows that
                      leave it are marked left-window (leftWindowAt, left_window_at), never
                      deleted; one state for every night (instead of --since/--until)
  --now ISO           what --window is relative to (default: now), e.g. to redo a missed night
  --state FILE        the state file (default: FILE.state.json next to --out;
                      with --pg, openbook-sync.DATABASE.TABLE[.ORG].state.json here);
                      it records the organization: another organization's key is refused.
                      One run at a time on a state: STATE.lock holds it
  --page-size N       rows per request (the API's limit), 2 to 100 (default 100); each request
                      re-reads the previous one's last row, so N-1 are new
  --checkpoint-every T  save the state every T (default 5s) ...
  --checkpoint-pages N  ... or every N pages (default 100), whichever comes first; a crash
                      re-reads what came after the last save (the output flushed to disk first)
  --timeout-ms N      time-out of one attempt of a request (default 30000)
  --max-elapsed T     retry a failing request, or a PostgreSQL blip (--pg), for up to T: 90s,
                      10m, 1h (default 5m; enough for a server restart), with backoff of up to
                      5 s between attempts
  --max-attempts N    attempts of one request (or of --pg through a blip), the first included
                      (default: no limit but --max-elapsed); 1 for no retry
  --max-deferred-passes N  a window's row that two passes missed, while the list changed under
                      both and the list outside the window is too long to read, stays as it
                      is (it may only have left the window); once the oldest has stayed
                      unsettled for N passes, a complete pass exits 5 (default 7)
  --json              print a JSON summary on standard output, also when the run fails
                      (then with exitCode and error)
  -h, --help          this text

One request at a time (the contract asks for at most two). Progress goes to standard error: a
bar with rate and ETA on a terminal, plain lines otherwise, and one line for each retry.
Exit codes, for a scheduler:
  0  the pass completed, or none was needed: the list had not changed since the last complete
     pass began (one request, answered 304; not with a rolling --window, which moves)
  1  temporary: the server or the network failed beyond the retries, PostgreSQL is unreachable
     or failed (a restart, a full disk), or the run was interrupted; retry later, the rerun
     resumes where this one stopped
  2  usage: a wrong option, a file that cannot be written, a CSV of other columns or a field
     the CSV's columns lack (NDJSON and --pg keep every field), a table of the wrong shape or in a
     schema that does not exist, PostgreSQL refusing (password, database, privilege), --org;
     the same command fails again, fix it first
  3  the key is refused (401: unknown, revoked or expired); fix the key first
  4  another openbook-sync is running on the same state: this run did nothing
  5  the pass completed, but a window's rows missing for --max-deferred-passes passes are still
     unsettled: the list changed while every pass since read it, so deletions are not reaching
     the output; run a pass when the organization is quiet, or see the client's README`

/**
 * The exit codes (USAGE): 1 retry later, 2 fix the command, 3 fix the key, 4 another run is on it,
 * 5 deletions left unsettled too long.
 */
const EXIT = { temporary: 1, usage: 2, key: 3, busy: 4, unsettled: 5 } as const

/** Passes a missing row may stay unsettled before a complete pass exits 5: a week of nightly runs. */
const MAX_DEFERRED_PASSES = 7

/** Set once the options are read: `--json` prints a summary on failure too. */
const failure: { json: boolean; resource: string | undefined; started: number; retries: number } = {
  json: false,
  resource: undefined,
  started: Date.now(),
  retries: 0,
}

function fail(code: 1 | 2 | 3 | 4, message: string, error?: unknown): never {
  process.stderr.write(`openbook-sync: ${message}\n`)
  if (failure.json) {
    const cause = error instanceof OpenbookError ? error : undefined
    const summary = {
      resource: failure.resource,
      complete: false,
      exitCode: code,
      error: {
        name: cause?.name ?? 'UsageError',
        code: cause?.code ?? null,
        status: cause?.status ?? null,
        requestId: cause?.requestId ?? null,
        message,
      },
      retries: failure.retries,
      durationMs: Date.now() - failure.started,
    }
    process.stdout.write(`${JSON.stringify(summary)}\n`)
  }
  process.exit(code)
}

function readKey(values: { 'key-file'?: string | undefined; 'key-env'?: string | undefined }): string {
  if (values['key-file'] && values['key-env']) fail(2, 'give --key-file or --key-env, not both')
  if (values['key-file']) {
    try {
      const mode = statSync(values['key-file']).mode & 0o777
      if (mode & 0o077)
        process.stderr.write(
          `openbook-sync: warning: ${values['key-file']} can be read by other users (mode ${mode.toString(8).padStart(4, '0')}): chmod 600 it\n`,
        )
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

const UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const

/** `90s`, `10m`, `1h`, `500ms`: milliseconds. */
function duration(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  const match = /^(\d{1,7})(ms|s|m|h)$/.exec(text)
  if (!match) fail(2, `--${name} must be a duration such as 90s, 10m or 1h`)
  return Number(match[1]) * UNITS[match[2] as keyof typeof UNITS]
}

/** A bar with rate and ETA on a terminal; a line every few seconds otherwise. */
/** A key that expires within this many days is warned about, once a run. */
export const KEY_EXPIRY_WARNING_DAYS = 30

/** One warning line when the key expires soon (the server's Openbook-Key-Expires), before a nightly job starts failing. */
function expiryWarning(): { seen(expiresAt: Date | undefined): void } {
  let warned = false
  return {
    seen(expiresAt) {
      if (warned || expiresAt === undefined) return
      const days = (expiresAt.getTime() - Date.now()) / 86_400_000
      if (days > KEY_EXPIRY_WARNING_DAYS) return
      warned = true
      process.stderr.write(
        `openbook-sync: warning: the API key expires at ${expiresAt.toISOString()} (in ${Math.max(0, Math.floor(days))} days): create a new key and switch to it before then\n`,
      )
    },
  }
}

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
    // `--window -90d..+30d`: a value that starts with a dash is taken for an option by parseArgs.
    const args = process.argv.slice(2)
    const joined = args.flatMap((arg, n) =>
      arg === '--window' && /^-\d/.test(args[n + 1] ?? '')
        ? [`--window=${args[n + 1]}`]
        : args[n - 1] === '--window' && /^-\d/.test(arg)
          ? []
          : [arg],
    )
    return parseArgs({
      args: joined,
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
        window: { type: 'string' },
        now: { type: 'string' },
        until: { type: 'string' },
        state: { type: 'string' },
        'page-size': { type: 'string' },
        'timeout-ms': { type: 'string' },
        'max-elapsed': { type: 'string' },
        'max-attempts': { type: 'string' },
        'max-deferred-passes': { type: 'string' },
        'checkpoint-every': { type: 'string' },
        'checkpoint-pages': { type: 'string' },
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
  failure.json = values.json === true
  failure.resource = positionals[0]
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
  const maxElapsedMs = duration('max-elapsed', values['max-elapsed'])
  const maxAttempts = number('max-attempts', values['max-attempts'])
  if (maxAttempts === 0) fail(2, '--max-attempts must be at least 1')
  const maxDeferredPasses =
    number('max-deferred-passes', values['max-deferred-passes']) ?? MAX_DEFERRED_PASSES
  if (maxDeferredPasses === 0) fail(2, '--max-deferred-passes must be at least 1')
  /** The attempts of the last request, and when it was first tried: for the failure's line. */
  const attempts = { count: 0, since: Date.now() }
  const progress = progressReporter(resource)
  const expiry = expiryWarning()
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
      window: values.window,
      now: values.now,
      until: values.until,
      statePath: values.state,
      pageSize: number('page-size', values['page-size']),
      timeoutMs: number('timeout-ms', values['timeout-ms']),
      maxElapsedMs,
      maxAttempts,
      checkpointMs: duration('checkpoint-every', values['checkpoint-every']),
      checkpointPages: number('checkpoint-pages', values['checkpoint-pages']),
      onClientEvent: (event: ClientEvent) => {
        if (event.type === 'response') expiry.seen(event.keyExpiresAt)
        if (event.type === 'retry') {
          failure.retries++
          // One line a retry, so that a run riding out an outage is not silent.
          process.stderr.write(
            `openbook-sync: attempt ${event.attempt} failed (${event.reason}${event.requestId ? `, request ${event.requestId}` : ''}): attempt ${event.attempt + 1} in ${(event.delayMs / 1000).toFixed(1)}s\n`,
          )
        }
        if (event.type !== 'request') return
        if (event.attempt === 1) attempts.since = Date.now()
        attempts.count = event.attempt
      },
      signal: controller.signal,
      onProgress: (p: SyncProgress) => progress.update(p),
    }
    const summary = values.pg
      ? await (await import('./targets/pg.js')).runPgSync({ ...common, pg: values.pg, table: values.table })
      : await runSync({ ...common, out: values.out ?? '' })
    progress.end()
    const unsettledFor = summary.deferredSince === null ? 0 : summary.pass - summary.deferredSince
    const unsettled = unsettledFor >= maxDeferredPasses
    if (values.json)
      process.stdout.write(
        `${JSON.stringify(unsettled ? { ...summary, exitCode: EXIT.unsettled } : summary)}\n`,
      )
    else if (summary.unchanged)
      process.stderr.write(
        `${resource}: unchanged since pass ${summary.pass} began (${summary.requests} request${summary.requests === 1 ? '' : 's'}, answered 304): nothing to read\n`,
      )
    else
      process.stderr.write(
        `${resource}: pass ${summary.pass} complete, ${summary.rows} rows read, ${summary.written} written, ${summary.tombstones} tombstones, ` +
          (resource === 'appointments'
            ? `${summary.leftWindow} left the window, ${summary.recovered} moved and kept, `
            : '') +
          `${summary.requests} requests (${summary.rereads} re-reads, ${summary.retries} retries) into ` +
          `${summary.format === 'pg' ? 'table ' : ''}${summary.out}\n`,
      )
    // Said whatever the output format: a scheduler's log keeps standard error.
    if (summary.deferred > 0)
      process.stderr.write(
        `openbook-sync: ${summary.deferred} row${summary.deferred === 1 ? '' : 's'} missing since pass ${summary.deferredSince} ` +
          `not settled: the list changed while each pass read it, so ${summary.deferred === 1 ? 'it' : 'they'} may only have moved; ` +
          `kept as they are, checked again by the next pass\n`,
      )
    if (unsettled) {
      process.stderr.write(
        `openbook-sync: deletions unsettled for ${unsettledFor} passes (--max-deferred-passes ${maxDeferredPasses}): ` +
          'run a pass while the organization is quiet\n',
      )
      process.exitCode = EXIT.unsettled
    }
  } catch (error) {
    progress.end()
    const request = (e: OpenbookError) => (e.requestId ? `, request ${e.requestId}` : '')
    if (error instanceof AuthenticationError)
      fail(
        EXIT.key,
        `${error.message} (${error.code ?? error.status}${request(error)}): ${
          error instanceof KeyExpiredError
            ? 'the key has expired: create a new one'
            : error instanceof KeyRevokedError
              ? 'the key was revoked: ask the organization for a new one'
              : 'check the key'
        }`,
        error,
      )
    if (error instanceof BadRequestError)
      fail(EXIT.usage, `${error.message} (${error.code ?? error.status}${request(error)})`, error)
    if (error instanceof SyncBusyError) fail(EXIT.busy, error.message, error)
    if (error instanceof SyncUsageError) fail(EXIT.usage, error.message, error)
    // 404, 405, 403 from a proxy …: the base URL is wrong, a rerun gets the same.
    if (error instanceof ApiError && !error.retryable)
      fail(EXIT.usage, `${error.message} (HTTP ${error.status}${request(error)}): check --base-url`, error)
    if (error instanceof UsageError) fail(EXIT.usage, error.message, error)
    if (error instanceof SyncTargetError) fail(EXIT.temporary, `${error.message}; rerun to resume`, error)
    if (error instanceof OpenbookError && error.retryable) {
      const seconds = Math.round((Date.now() - attempts.since) / 1000)
      fail(
        EXIT.temporary,
        `${error.message} (after ${attempts.count} attempt${attempts.count === 1 ? '' : 's'} in ${seconds}s${request(error)}); rerun to resume`,
        error,
      )
    }
    if (error instanceof OpenbookError)
      fail(
        EXIT.temporary,
        `${error.message}${error.requestId ? ` (request ${error.requestId})` : ''}; rerun to resume`,
        error,
      )
    fail(EXIT.temporary, `${(error as Error)?.message ?? String(error)}; rerun to resume`)
  }
}

await main()
