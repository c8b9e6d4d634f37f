import { existsSync } from 'node:fs'
import { statfs } from 'node:fs/promises'
import { join } from 'node:path'

/** The embedded store could not be opened, said in words: what is wrong and what to do. */
export class EmbeddedOpenError extends Error {}

/**
 * Below this much free space PGlite cannot start (it writes a WAL segment of 16 MB, and at start
 * it checkpoints): an open that fails then fails for the disk.
 */
export const LOW_DISK_BYTES = 16 * 1024 * 1024

/**
 * Signs of a full disk in an error: the operating system's (ENOSPC), PostgreSQL's disk_full
 * (53100), or the FATAL with which PostgreSQL refuses each new session when its disk is full: the
 * backend cannot write its relation-cache init file and says so as an internal error (XX000).
 */
export function isDiskFull(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  const said = String(message ?? '')
  return (
    code === 'ENOSPC' ||
    code === '53100' ||
    (code === 'XX000' && /could not write init file/i.test(said)) ||
    /ENOSPC|no space left on device/i.test(said)
  )
}

/** What PGlite says when its WebAssembly PostgreSQL could not start on the files it found. */
function saysPgliteFailed(error: unknown): boolean {
  const message = String((error as { message?: unknown }).message ?? '')
  return /PGlite failed to initialize|Aborted\(|RuntimeError|unreachable|memory access out of bounds/i.test(
    message,
  )
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024 * 1024) return `${Math.max(0, Math.round(bytes / 1024))} kB`
  if (bytes < 1024 * 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MB`
  return `${(bytes / (1024 * 1024 * 1024)).toFixed(1)} GB`
}

/** Free space for an unprivileged writer on the file system of `dir`; undefined when it cannot be read. */
export async function freeBytes(dir: string): Promise<number | undefined> {
  try {
    const stats = await statfs(dir)
    return stats.bavail * stats.bsize
  } catch {
    return undefined
  }
}

/**
 * Why opening the embedded store in `dataDir` failed, in words, or `error` itself when it is none
 * of these (the lock, a bug):
 * - a full disk: said so by the error, or PGlite failed while less than LOW_DISK_BYTES are free;
 * - files PGlite cannot start on, with room to spare: a damaged store, and what to do about it.
 * `free` is the free space of DATA_DIR's file system (freeBytes), given by the caller.
 */
export function explainOpenFailure(dataDir: string, error: unknown, free: number | undefined): unknown {
  const pglite = saysPgliteFailed(error)
  const lowDisk = free !== undefined && free < LOW_DISK_BYTES
  if (isDiskFull(error) || (pglite && lowDisk)) {
    const room = free === undefined ? '' : `: ${formatBytes(free)} free`
    return new EmbeddedOpenError(
      `disk full in DATA_DIR (${dataDir}${room}): free space on its file system and try again`,
    )
  }
  if (pglite && existsSync(join(dataDir, 'PG_VERSION'))) {
    const said = String((error as Error).message)
      .split('\n')[0]
      ?.trim()
    return new EmbeddedOpenError(
      `the embedded store in DATA_DIR (${dataDir}) is corrupted: PGlite cannot start on its files (${said}). ` +
        `Restore DATA_DIR from a backup, or move it aside (mv ${dataDir} ${dataDir}.corrupted) and start again with a new, empty store`,
    )
  }
  return error
}
