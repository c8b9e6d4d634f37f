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
 * WebAssembly is compiled (unless WorkerData.shortLived). V8's baseline compiler (Liftoff) compiles
 * each PostgreSQL function quickly at its first call and the optimizing compiler only the hot ones
 * later, so a first start is about 2 s shorter than with `--no-liftoff` (optimizing every function
 * at its first call). With V8's default of one compilation task per core, the baseline code is
 * compiled on several background threads at once, whose malloc arenas keep 60-80 MB resident; one
 * task keeps the peak RSS under load within the 300 MB target. Measured on a quiet 2-core machine
 * (bench/RESULTS.md, "First start"): `--no-liftoff` 6.3 s to the first 200 and 250 MB peak,
 * `--liftoff` 4.7 s and 339 MB, these flags 4.2 s and 277 MB.
 */
export const EMBEDDED_V8_FLAGS = '--liftoff --wasm-num-compilation-tasks=1'

/**
 * The database thread's V8 young generation, in MB (`resourceLimits.maxYoungGenerationSizeMb`).
 * V8's own limit lets it grow to about 50 MB under load, nearly all of it garbage between two
 * collections; the thread's live objects are a few megabytes (an answer's rows go on as bytes).
 * At 12 the server's peak RSS under load on the demo was 260-269 MB against 291-297, at the same
 * requests a second (bench/RESULTS.md, "The embedded store's requests in a row").
 */
export const EMBEDDED_THREAD_YOUNG_MB = 12
