import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { accepts, freePort } from '../proc.js'

describe('accepts (a started server listens)', () => {
  it('is true where a server listens', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const address = server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    try {
      expect(await accepts(port)).toBe(true)
    } finally {
      server.close()
    }
  })

  it('is false where nobody listens, even when the probe connects to itself', async () => {
    const port = await freePort()
    expect(await accepts(port)).toBe(false)
    // The probe's own port the same as the server's: loopback TCP connects the socket to itself.
    expect(await accepts(port, port)).toBe(false)
  })
})
