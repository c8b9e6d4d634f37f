/** Messages between the embedded store (main thread) and its database thread (embedded-worker.ts). */

export interface WorkerData {
  readonly dataDir: string
  /**
   * The process runs one command and exits (the CLI), not a server: PGlite's WebAssembly is then
   * compiled with V8's defaults (baseline code on a task per core: the quickest start) rather than
   * for a small footprint (EMBEDDED_V8_FLAGS in embedded-settings.ts). V8's flags are the
   * process's: a server process should not open a short-lived store.
   */
  readonly shortLived?: boolean
  /** The template a new DATA_DIR is copied from (embedded-template.ts); false: none, initdb always. */
  readonly template?: string | false
}

/** How the database thread opened DATA_DIR: as it was, or made new from the template or by initdb. */
export type DataDirOrigin =
  | { readonly made: 'no' }
  | { readonly made: 'template' }
  | { readonly made: 'initdb'; readonly templateUnused?: string }

/**
 * `KEY_ORGANIZATION` (store/types.ts) as a statement's parameter in a message: the database thread
 * binds the organization that the transaction's key lookup named.
 */
export const KEY_ORGANIZATION_PARAM = { keyOrganization: true } as const

export const isKeyOrganizationParam = (value: unknown): value is typeof KEY_ORGANIZATION_PARAM =>
  typeof value === 'object' &&
  value !== null &&
  (value as { keyOrganization?: unknown }).keyOrganization === true

export type DatabaseRequest =
  | { readonly op: 'open' }
  | {
      readonly op: 'begin'
      readonly preamble: string
      /** The request path: a fixed set of statements, kept prepared (see embedded-worker.ts). */
      readonly prepared: boolean
      readonly readOnly: boolean
      /**
       * A request's: when it must have begun (ms since the epoch). Past it, the thread runs none of
       * its statements and answers each with `GIVEN_UP`: the client was answered busy meanwhile.
       */
      readonly startBy?: number
    }
  | {
      readonly op: 'query'
      readonly text: string
      readonly params: readonly unknown[]
      /**
       * The statement ends its read-only transaction: the thread owes its COMMIT once the statement
       * has run or failed, and the next transaction's messages may follow it (embedded.ts).
       */
      readonly ends?: boolean
    }
  /** As `query`, each result answered as its columns and its rows' bytes (`ResultBytes`). */
  | {
      readonly op: 'queryBytes'
      readonly text: string
      readonly params: readonly unknown[]
      readonly ends?: boolean
    }
  | { readonly op: 'exec'; readonly text: string }
  | {
      readonly op: 'copy'
      readonly table: string
      readonly columns: readonly string[]
      readonly text: string
    }
  | { readonly op: 'end'; readonly commit: boolean }
  /** A statement that cannot run in a transaction (VACUUM, CHECKPOINT), between transactions. */
  | { readonly op: 'maintain'; readonly text: string }
  | { readonly op: 'close' }

/** A request as it goes to the thread, with the memory of answers done with (`ResultBytes.rows`). */
export interface DatabaseMessage {
  readonly id: number
  readonly request: DatabaseRequest
  readonly spare?: readonly ArrayBuffer[]
}

/** The name of the error a statement of a transaction begun past its `startBy` is answered with. */
export const GIVEN_UP = 'TransactionGivenUp'

/** A result's columns and its DataRow messages, each whole (code, length, fields), one after another. */
export interface ResultBytes {
  readonly fields: readonly { readonly name: string; readonly dataTypeID: number }[]
  readonly rows: Uint8Array
}

export type DatabaseResponse =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: SerializedError }

/** An error's message and its plain fields (PostgreSQL's code, detail, constraint, where…). */
export interface SerializedError {
  readonly name: string
  readonly message: string
  readonly fields: Readonly<Record<string, string | number | boolean>>
}

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), fields: {} }
  const fields: Record<string, string | number | boolean> = {}
  for (const [key, value] of Object.entries(error)) {
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      fields[key] = value
  }
  return { name: error.name, message: error.message, fields }
}

/** The error again, on this side of the thread boundary, with the same fields. */
export function deserializeError(error: SerializedError): Error {
  const rebuilt = Object.assign(new Error(error.message), error.fields)
  rebuilt.name = error.name
  return rebuilt
}
