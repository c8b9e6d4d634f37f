import type { Readable } from 'node:stream'
import type { Store } from '../store/types.js'

export interface Output {
  write(text: string): unknown
}

export interface StoreOptions {
  /** `migrate`: the schema is not checked first. */
  readonly migrating?: boolean
  /**
   * `work` writes nothing, or nothing a second run would not (`migrate`): when the database goes
   * away under it (a failover, a pooler restarting), it is run again, from the opening of the
   * store, for a while (local.ts).
   */
  readonly idempotent?: boolean
}

/** Where a command reads and writes, and how it reaches the store: local, or inside a running server. */
export interface CliContext {
  readonly stdout: Output
  readonly stderr: Output
  readonly stdin: Readable
  /** True on a terminal: progress bars are drawn only then. */
  readonly interactive: boolean
  readonly apiKeyBrand: string
  /** Opens the input of `import`: a path, or `-` for standard input. */
  openInput(file: string): Promise<Readable>
  withStore<T>(work: (store: Store) => Promise<T>, options?: StoreOptions): Promise<T>
}
