/**
 * Creates the embedded store's database in DATA_DIR, as a child process of the database thread
 * (embedded-worker.ts), which opens DATA_DIR once this has ended:
 *
 *   node dist/store/embedded/embedded-create.js <DATA_DIR> <PGlite options as JSON>
 *
 * PGlite's initdb takes about 480 MB for a few seconds, however small the database: it copies its
 * whole WebAssembly memory (128 MB, the least PGlite runs in) and writes the copy back before
 * each step. In the server's process much of it stays resident (WebAssembly memory is never given
 * back, and the copies wait for garbage collection: the server still held 500 MB after 10 s of
 * load, against 230 MB now); here it ends with the process. PGlite creates the database in its
 * in-memory file system, and the files are then written to DATA_DIR: about 100 MB less than
 * PGlite's own path to a directory, which packs the files into a tar archive in memory and unpacks
 * it there.
 *
 * PG_VERSION goes last: the database thread takes a DATA_DIR with it for a database, so one that
 * this process left half-written (killed, disk full) is created again at the next start.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { PGlite, type PGliteOptions } from '@electric-sql/pglite'

const [dataDir, optionsJson] = process.argv.slice(2)
if (!dataDir || !optionsJson) throw new Error('usage: embedded-create.js <DATA_DIR> <PGlite options as JSON>')

// The database thread's process ended (its end of standard input closed): stop, DATA_DIR is not ours.
process.stdin.on('end', () => process.exit(1)).resume()

// PGlite's initdb runs in long synchronous stretches, during which this thread reads no input: a
// thread of its own watches the parent meanwhile (killed, or gone after a SIGHUP), and ends this
// process at once when it is gone. What was written of DATA_DIR lacks PG_VERSION: it is created
// again at the next start.
const parent = process.ppid
new Worker(
  `const { workerData } = require('node:worker_threads')
   setInterval(() => { if (process.ppid !== workerData) process.kill(process.pid, 'SIGKILL') }, 200)`,
  { eval: true, workerData: parent },
).unref()

const db = await PGlite.create('memory://', JSON.parse(optionsJson) as PGliteOptions)
const { FS } = db.Module
// Shut down cleanly (a checkpoint) before the files are copied.
await db.close()

const root = PGlite.paths.PGDATA
const MARKER = 'PG_VERSION'

function copy(from: string, to: string): void {
  mkdirSync(to, { recursive: true, mode: 0o700 })
  for (const name of FS.readdir(from)) {
    if (name === '.' || name === '..' || (from === root && name === MARKER)) continue
    const path = `${from}/${name}`
    if (FS.isDir(FS.stat(path).mode)) copy(path, join(to, name))
    else writeFileSync(join(to, name), FS.readFile(path), { mode: 0o600 })
  }
}

copy(root, dataDir)
writeFileSync(join(dataDir, MARKER), FS.readFile(`${root}/${MARKER}`), { mode: 0o600 })
process.exit(0)
