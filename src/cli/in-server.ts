import type { Config } from '../config.js'
import { cancellable } from '../operator/cancellable.js'
import type { CommandRunner } from '../operator/protocol.js'
import type { Store } from '../store/types.js'
import { runCli } from './program.js'

/**
 * How the embedded server runs a command forwarded through its operator socket: on the store it
 * holds, with the client's output and input, cancelled when the client goes or the server stops.
 */
export function inServerRunner(store: Store, config: Pick<Config, 'apiKeyBrand'>): CommandRunner {
  return (argv, io) =>
    runCli(argv, {
      stdout: io.stdout,
      stderr: io.stderr,
      stdin: io.stdin,
      interactive: false,
      apiKeyBrand: config.apiKeyBrand,
      openInput: async () => io.stdin,
      withStore: (work) => work(cancellable(store, io.signal)),
    })
}
