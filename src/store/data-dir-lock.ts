import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import lockfile from 'proper-lockfile'

/**
 * PGlite is one process's database: a second process writing the same DATA_DIR corrupts it. So
 * exactly one process opens a DATA_DIR, the one that holds `DATA_DIR/openbook.lock`.
 *
 * The lock is proper-lockfile's: an atomic mkdir whose mtime the holder refreshes. A holder that
 * crashed (kill -9, power loss) stops refreshing it, and after STALE_MS the next process takes it
 * over. A holder that is merely busy keeps it, whatever its age.
 */
const STALE_MS = 10_000
const LOCK_NAME = 'openbook.lock'
const HOLDER_FILE = 'openbook.holder.json'

interface Holder {
  readonly pid: number
  readonly host: string
  readonly command: string
  readonly since: string
}

/** Another live process holds the DATA_DIR; the message names it. */
export class DataDirBusyError extends Error {}

function readHolder(dataDir: string): Holder | undefined {
  try {
    return JSON.parse(readFileSync(join(dataDir, HOLDER_FILE), 'utf8')) as Holder
  } catch {
    return undefined
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** True when the holder is known to be gone: on this host, and its process no longer exists. */
function holderIsGone(holder: Holder): boolean {
  return holder.host === hostname() && holder.pid !== process.pid && !isAlive(holder.pid)
}

export interface DataDirLock {
  release(): Promise<void>
}

export interface LockOptions {
  /** What the holder is doing, for the message another process prints: `openbook server`, `openbook import`. */
  readonly command: string
  /** The lock was lost (its directory removed or taken over): stop writing at once. */
  readonly onCompromised: (error: Error) => void
}

/**
 * Takes DATA_DIR's lock, or throws DataDirBusyError naming the live holder. A lock left by a process
 * that has stopped is waited out (at most STALE_MS) and then taken over.
 */
export async function lockDataDir(dataDir: string, options: LockOptions): Promise<DataDirLock> {
  const deadline = Date.now() + STALE_MS + 2_000
  for (;;) {
    try {
      const release = await lockfile.lock(dataDir, {
        realpath: false,
        lockfilePath: join(dataDir, LOCK_NAME),
        stale: STALE_MS,
        retries: 0,
        onCompromised: options.onCompromised,
      })
      const holder: Holder = {
        pid: process.pid,
        host: hostname(),
        command: options.command,
        since: new Date().toISOString(),
      }
      writeFileSync(join(dataDir, HOLDER_FILE), `${JSON.stringify(holder)}\n`, { mode: 0o600 })
      return {
        async release() {
          rmSync(join(dataDir, HOLDER_FILE), { force: true })
          await release()
        },
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error
      const holder = readHolder(dataDir)
      // A holder that is alive keeps the lock. One that is gone (or not yet named: it may have died
      // between taking the lock and naming itself) is waited out until its lock turns stale.
      if ((holder && !holderIsGone(holder)) || Date.now() > deadline) {
        const who = holder
          ? `${holder.command} (pid ${holder.pid}${holder.host === hostname() ? '' : ` on ${holder.host}`})`
          : 'another openbook process'
        throw new DataDirBusyError(
          `DATA_DIR ${dataDir} is in use by ${who}: PGlite allows one process at a time; ` +
            'wait for it to finish, or stop it first',
        )
      }
      // The holder crashed: its lock turns stale once it has not been refreshed for STALE_MS.
      await sleep(500)
    }
  }
}
