import type { Config } from '../config.js'
import { cancellable } from '../operator/cancellable.js'
import type { CommandRunner, ForwardedIo } from '../operator/protocol.js'
import type { Store } from '../store/types.js'
import { runCli } from './program.js'

/** How long a forwarded command waits for the store before it says what it waits for. */
export const WAITING_NOTICE_MS = 1_000

/** The forwarded command that holds the store's one transaction now, if any. */
interface Holder {
  readonly command: string
  readonly pid: number | undefined
}

/**
 * The store as one forwarded command sees it: cancelled with it (cancellable), and, when its
 * transaction has to wait for another (PGlite runs one at a time: an import can hold it for
 * minutes), saying once on the command's stderr what it waits for.
 */
function waitingStore(
  store: Store,
  io: ForwardedIo,
  self: Holder,
  holder: { current: Holder | undefined },
): Store {
  const guarded = cancellable(store, io.signal)
  let said = false
  return {
    ...guarded,
    admin: <T>(work: Parameters<Store['admin']>[0]) => {
      let started = false
      const timer = setTimeout(() => {
        if (started || said) return
        said = true
        const busy = holder.current
        const what = busy
          ? `openbook ${busy.command}${busy.pid ? ` (pid ${busy.pid})` : ''}`
          : "the server's own work (start-up, maintenance)"
        io.stderr.write(`waiting: DATA_DIR is busy with ${what}\n`)
      }, WAITING_NOTICE_MS)
      return guarded
        .admin(async (sql) => {
          started = true
          clearTimeout(timer)
          holder.current = self
          try {
            return (await work(sql)) as T
          } finally {
            holder.current = undefined
          }
        })
        .finally(() => clearTimeout(timer))
    },
  }
}

/**
 * How the embedded server runs a command forwarded through its operator socket: on the store it
 * holds, with the client's output and input, cancelled when the client goes or the server stops.
 */
export function inServerRunner(store: Store, config: Pick<Config, 'apiKeyBrand'>): CommandRunner {
  const holder: { current: Holder | undefined } = { current: undefined }
  return (argv, io) =>
    runCli(argv, {
      stdout: io.stdout,
      stderr: io.stderr,
      stdin: io.stdin,
      interactive: false,
      apiKeyBrand: config.apiKeyBrand,
      openInput: async () => io.stdin,
      withStore: (work) =>
        work(waitingStore(store, io, { command: argv[0] ?? 'command', pid: io.clientPid }, holder)),
    })
}
