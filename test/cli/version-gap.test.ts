import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { messageLine, operatorSocketPath } from '../../src/operator/protocol.js'
import { serveOperatorSocket } from '../../src/operator/server.js'
import { LATEST_VERSION } from '../../src/store/schema/schema-version.js'
import { scratchRoot } from '../helpers/process.js'
import { openbook } from './run.js'

/**
 * A command line of another release than the embedded server that holds DATA_DIR: the server's
 * commander answers `error: unknown command 'list'` for a command it does not have. When this
 * command line knows the command, it says what that is, a release gap, and what to do, whatever
 * the two schema versions. The other server is played by an operator socket that answers as one
 * does: with its release (this protocol) or without it (the oldest releases said nothing of
 * their version).
 */
describe('a command the embedded server of another release does not know', () => {
  const dirs: string[] = []
  const closers: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const close of closers.splice(0)) await close()
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })
  const dataDir = () => {
    const dir = mkdtempSync(join(scratchRoot(), 'openbook-gap-'))
    dirs.push(dir)
    return dir
  }
  const unknownCommand = "error: unknown command 'list'\n"
  /** An operator socket at `schema` that answers every command with `answer` on stderr. */
  const serverAnswering = async (dir: string, schema: number, answer: string) => {
    const server = await serveOperatorSocket(
      dir,
      async (_argv, io) => {
        io.stderr.write(answer)
        io.stderr.write('(run openbook --help for usage)\n')
        return 1
      },
      { schema },
    )
    closers.push(() => server.close())
  }

  it('a server that names its older release: the line names both versions and the fix', async () => {
    const dir = dataDir()
    const server = await serveOperatorSocket(
      dir,
      async (_argv, io) => {
        io.stderr.write(unknownCommand)
        return 1
      },
      { schema: LATEST_VERSION - 1 },
    )
    closers.push(() => server.close())
    const result = await openbook(['orgs', 'list'], { DATA_DIR: dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(
      `openbook: the embedded server holding DATA_DIR runs an older openbook (schema version ${LATEST_VERSION - 1}) ` +
        `than this command line (schema version ${LATEST_VERSION}), and does not know \`openbook orgs list\`: ` +
        'restart the server with this release, or stop it and run the command again\n',
    )
  })

  it('a server from before the release line (it sends none) is still named as older', async () => {
    const dir = dataDir()
    const server = createServer({ allowHalfOpen: true }, (socket) => {
      socket.once('data', () => {
        socket.write(messageLine({ e: unknownCommand }))
        socket.end(messageLine({ exit: 1 }))
      })
    })
    await new Promise<void>((resolve) => server.listen(operatorSocketPath(dir), resolve))
    closers.push(() => new Promise((resolve) => server.close(() => resolve())))
    const result = await openbook(['orgs', 'list'], { DATA_DIR: dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(
      /^openbook: the embedded server holding DATA_DIR runs an older openbook \(a release from before .*\), and does not know `openbook orgs list`: restart the server/,
    )
    expect(result.stderr).not.toContain('unknown command')
  })

  it('a server at the same schema version that lacks the command: named as another release', async () => {
    const dir = dataDir()
    await serverAnswering(dir, LATEST_VERSION, unknownCommand)
    const result = await openbook(['orgs', 'list'], { DATA_DIR: dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(
      `openbook: the embedded server holding DATA_DIR runs another release of openbook than this command line (both at schema version ${LATEST_VERSION}), ` +
        'and does not know `openbook orgs list`: restart the server with this release, or stop it and run the command again\n',
    )
  })

  it('an option this command line knows and the server does not, on a newer schema: a release gap', async () => {
    const dir = dataDir()
    await serverAnswering(dir, LATEST_VERSION + 1, "error: unknown option '--json'\n")
    const result = await openbook(['orgs', 'list', '--json'], { DATA_DIR: dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(
      `openbook: the embedded server holding DATA_DIR runs a newer openbook (schema version ${LATEST_VERSION + 1}) than this command line (schema version ${LATEST_VERSION}), ` +
        'and does not know `openbook orgs list --json`: restart the server with this release, or stop it and run the command again\n',
    )
  })

  it("a command neither knows: the server's usage error stands, at any schema version", async () => {
    const dir = dataDir()
    await serverAnswering(dir, LATEST_VERSION - 1, "error: unknown command 'show'\n")
    const result = await openbook(['orgs', 'show', 'org_x'], { DATA_DIR: dir })
    expect(result.stderr).toBe("error: unknown command 'show'\n(run openbook --help for usage)\n")
  })

  it('a server of this release passes its own errors on unchanged', async () => {
    const dir = dataDir()
    const server = await serveOperatorSocket(
      dir,
      async (_argv, io) => {
        io.stderr.write("error: unknown command 'nope'\n")
        return 1
      },
      { schema: LATEST_VERSION },
    )
    closers.push(() => server.close())
    const result = await openbook(['nope'], { DATA_DIR: dir })
    expect(result.stderr).toContain("unknown command 'nope'")
  })
})
