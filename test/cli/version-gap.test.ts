import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { messageLine, operatorSocketPath } from '../../src/operator/protocol.js'
import { serveOperatorSocket } from '../../src/operator/server.js'
import { LATEST_VERSION } from '../../src/store/schema-version.js'
import { scratchRoot } from '../helpers/process.js'
import { openbook } from './run.js'

/**
 * A command line newer than the embedded server that holds DATA_DIR: the server's commander
 * answers `error: unknown command 'show'` for a command it does not have. The command line says
 * what that is, a version gap, and what to do. The older server is played by an operator socket
 * that answers as one does: with its release (this protocol) or without it (releases up to
 * 0ff2148, which said nothing of their version).
 */
describe('a newer command on an older embedded server', () => {
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
  const unknownCommand = "error: unknown command 'show'\n"

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
    const result = await openbook(['orgs', 'show', 'org_x'], { DATA_DIR: dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(
      `openbook: the embedded server holding DATA_DIR runs an older openbook (schema version ${LATEST_VERSION - 1}) ` +
        `than this command line (schema version ${LATEST_VERSION}), and does not know \`openbook orgs show org_x\`: ` +
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
    const result = await openbook(['orgs', 'show', 'org_x'], { DATA_DIR: dir })
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(
      /^openbook: the embedded server holding DATA_DIR runs an older openbook \(a release from before .*\), and does not know `openbook orgs show org_x`: restart the server/,
    )
    expect(result.stderr).not.toContain('unknown command')
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
