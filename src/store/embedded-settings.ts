/**
 * How the embedded store runs PostgreSQL (PGlite) on its database thread: sized for a small laptop
 * or a 1 GB container, where it is the zero-set-up default. PGlite's own defaults are a server's
 * (shared_buffers 128MB, 100 connections); in PGlite, PostgreSQL's shared memory is allocated and
 * zeroed inside its WebAssembly memory, which never shrinks, so every megabyte of it stays resident
 * for the life of the process. Measured with bench/embedded-memory.ts (peak RSS and req/s of the
 * server on the demo); test/store/embedded-memory.test.ts checks that they are in effect.
 */

/**
 * Settings passed to PostgreSQL at each start (`postgres -c name=value`): they override the
 * data directory's postgresql.conf, so a DATA_DIR created before them gets them too.
 */
export const EMBEDDED_SETTINGS = {
  /**
   * The buffer cache: 16MB holds the demo (about 1 MB of tables and indexes) many times over, and
   * an organization's pages of a larger import; pages beyond it are read from the operating
   * system's file cache. All of PostgreSQL's shared memory, resident from the start, comes to 21MB
   * with these settings (SHOW shared_memory_size), against 145MB with PGlite's.
   */
  shared_buffers: '16MB',
  /**
   * PGlite serves one connection. Per-connection slots (locks, snapshots) are sized for this many
   * and reserved whole: 3MB less than for 100. Must exceed superuser_reserved_connections (3).
   */
  max_connections: '8',
  /**
   * Memory of one VACUUM or CREATE INDEX, which stays resident after it (WebAssembly memory is never
   * given back): an index built on 400,000 rows leaves 15 MB behind with 16MB, 28 MB with
   * PostgreSQL's default of 64MB, in about the same time.
   */
  maintenance_work_mem: '16MB',
} as const satisfies Record<string, string>

/** PGlite's start parameters with the embedded settings added. */
export function embeddedStartParams(defaults: readonly string[]): string[] {
  return [
    ...defaults,
    ...Object.entries(EMBEDDED_SETTINGS).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
  ]
}

/** initdb's parameters for the same settings (`initdb --set name=value`). */
export function embeddedInitdbParams(): string[] {
  return Object.entries(EMBEDDED_SETTINGS).flatMap(([name, value]) => ['--set', `${name}=${value}`])
}

/**
 * V8 flags of the process that runs the embedded store, set by its database thread before PGlite's
 * WebAssembly is compiled (unless WorkerData.shortLived). `--no-liftoff`: compile PostgreSQL once
 * with the optimizing compiler, instead of first with the baseline compiler and then again for each
 * hot function. The baseline compilation of its 9 MB of WebAssembly, on V8's background threads,
 * leaves 50-60 MB behind in malloc's arenas: 60-80 MB more peak RSS for the server. The price is
 * at PGlite's start: about 1.5 s of CPU to compile instead of 0.5 s; after it, a query costs the
 * same CPU (and the first few hundred less, as none waits for its functions to be optimized).
 */
export const EMBEDDED_V8_FLAGS = '--no-liftoff'
