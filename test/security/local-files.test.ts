import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { createConnection } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { operatorSocketPath } from '../../src/operator/protocol.js'
import { serveOperatorSocket } from '../../src/operator/server.js'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'

// Only the directory is under test here: PGlite's on-disk initdb (seconds) is replaced by a stub.
vi.mock('@electric-sql/pglite', () => ({
  PGlite: { create: async () => ({ close: async () => {} }) },
}))

/**
 * The embedded server's local surface: its data directory (key hashes, personal data) and the
 * operator socket (whoever connects runs operator commands, such as creating API keys).
 */
describe('local files of the embedded server', () => {
  const root = mkdtempSync(join(tmpdir(), 'openbook-local-'))
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  /** Runs `work` under a permissive umask, as in a container that sets umask 000. */
  async function underUmask<T>(mask: number, work: () => Promise<T>): Promise<T> {
    const previous = process.umask(mask)
    try {
      return await work()
    } finally {
      process.umask(previous)
    }
  }

  it('a new DATA_DIR is created 0700, even under umask 000', async () => {
    const dataDir = join(root, 'data')
    const store = await underUmask(0, () => createEmbeddedStore(dataDir))
    try {
      expect(statSync(dataDir).mode & 0o777).toBe(0o700)
    } finally {
      await store.close()
    }
  })

  it('the operator socket is 0600, even under umask 000, and still serves its owner', async () => {
    const dataDir = join(root, 'sock')
    await underUmask(0, async () => mkdirSync(dataDir, { mode: 0o777 }))
    const server = await underUmask(0, async () => {
      const serving = await serveOperatorSocket(
        dataDir,
        async (argv, io) => {
          io.stdout.write(`ran ${argv.join(' ')}`)
          return 0
        },
        { schema: 1 },
      )
      // The process umask is back to what it was (000 here) once the socket is bound.
      const current = process.umask(0)
      expect(current).toBe(0)
      return serving
    })
    try {
      expect(statSync(operatorSocketPath(dataDir)).mode & 0o777).toBe(0o600)
      const reply = await new Promise<string>((resolve, reject) => {
        const socket = createConnection(operatorSocketPath(dataDir))
        let text = ''
        socket.setEncoding('utf8')
        socket.on('data', (chunk: string) => {
          text += chunk
        })
        socket.on('error', reject)
        socket.on('close', () => resolve(text))
        socket.end(`${JSON.stringify({ argv: ['keys', 'list'] })}\n`)
      })
      expect(reply).toContain('ran keys list')
    } finally {
      server.close()
    }
  })
})
