import { once } from 'node:events'
import { createServer, type Socket, connect as tcpConnect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RoundTripTimeout, within } from '../../src/store/postgres/connection.js'

// A round trip's deadline (store/postgres/connection.ts, `within`) on an event loop held up past
// it: an answer that arrived in time is an answer, and one that did not is a timeout.

let server: ReturnType<typeof createServer>
const sockets: Socket[] = []

beforeAll(async () => {
  server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
})

afterAll(() => {
  for (const socket of sockets) socket.destroy()
  server.close()
})

/** A connection of its own for each test: the client's end, and the peer that answers on it. */
async function connection(): Promise<{ client: Socket; peer: Socket }> {
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  const accepted = once(server, 'connection')
  const client = tcpConnect(address.port, '127.0.0.1')
  await once(client, 'connect')
  const [peer] = (await accepted) as [Socket]
  sockets.push(client, peer)
  return { client, peer }
}

/** Holds the event loop for `ms`, as a burst of synchronous work does. */
function holdTheLoop(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // busy
  }
}

describe('a round trip held to a deadline', () => {
  it('takes an answer that came in before the deadline, though the loop reads it after', async () => {
    const { client, peer } = await connection()
    const answer = once(client, 'data').then(([data]) => String(data))
    const bounded = within(answer, 20, () => undefined)
    // The answer is in the socket's buffer at once; the loop is busy until well past the deadline,
    // and then runs its expired timer before it reads the socket.
    peer.write('answer')
    holdTheLoop(150)
    await expect(bounded).resolves.toBe('answer')
  })

  it('still times out a round trip whose answer comes after the deadline', async () => {
    const { client, peer } = await connection()
    const answer = once(client, 'data').then(([data]) => String(data))
    let abandoned: string | undefined
    const bounded = within(answer, 20, (late) => {
      abandoned = late
    })
    const sent = new Promise((resolve) => setTimeout(resolve, 120)).then(() => peer.write('late'))
    await expect(bounded).rejects.toBeInstanceOf(RoundTripTimeout)
    await sent
    await answer
    expect(abandoned).toBe('late')
  })
})
