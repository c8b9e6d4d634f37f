import type { Readable } from 'node:stream'
import type { Store } from '../store/types.js'

export interface Output {
  write(text: string): unknown
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
  withStore<T>(work: (store: Store) => Promise<T>, options?: { migrating?: boolean }): Promise<T>
}
