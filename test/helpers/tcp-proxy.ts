import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net'

/**
 * A TCP proxy in front of PostgreSQL that a test can take down and bring back, as a pooler or a
 * server restarting looks to its clients: `stop()` closes the listener and every connection
 * (refused from then on), `start()` listens on the same port again; `freeze()` keeps the
 * connections open but passes nothing on (a peer that stopped answering).
 */
export class TcpProxy {
  #server: Server | undefined
  readonly #sockets = new Set<Socket>()
  #frozen = false
  #sessionDelayMs = 0
  #refusal: Buffer | undefined
  /** The cut to make, the sessions that have sent its `after`, and how many more to cut. */
  #cut: (Cut & { armed: WeakSet<Socket>; left: number }) | undefined
  /** Server sides of cut sessions, whose answers are no longer passed on. */
  readonly #cutOff = new WeakSet<Socket>()
  port = 0
  /** Sessions refused so far (refuseSessions). */
  refused = 0

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  static forUrl(url: string): TcpProxy {
    const parsed = new URL(url)
    return new TcpProxy(parsed.hostname, Number(parsed.port || 5432))
  }

  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string {
    const parsed = new URL(url)
    parsed.hostname = '127.0.0.1'
    parsed.port = String(this.port)
    return parsed.toString()
  }

  async start(): Promise<void> {
    const server = createServer((client) => {
      if (this.#refusal) return this.#refuse(client, this.#refusal)
      if (this.#sessionDelayMs > 0) {
        // Unread until then: the startup message waits in the socket, as with a server slow to fork.
        client.pause()
        this.#sockets.add(client)
        const delayed = setTimeout(() => {
          this.#sockets.delete(client)
          if (!client.destroyed) this.#pass(client)
        }, this.#sessionDelayMs)
        client.on('close', () => clearTimeout(delayed))
        client.on('error', () => client.destroy())
        return
      }
      this.#pass(client)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.port, '127.0.0.1', () => resolve())
    })
    const address = server.address()
    if (address && typeof address === 'object') this.port = address.port
    this.#server = server
    this.#frozen = false
  }

  /** Passes a session on to the server, both ways. */
  #pass(client: Socket): void {
    const upstream = tcpConnect(this.targetPort, this.targetHost)
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket)
      socket.on('close', () => this.#sockets.delete(socket))
      socket.on('error', () => {
        client.destroy()
        upstream.destroy()
      })
    }
    client.on('data', (chunk) => {
      if (this.#frozen || this.#cuts(chunk, client, upstream)) return
      upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (!this.#frozen && !this.#cutOff.has(upstream)) client.write(chunk)
    })
    client.on('close', () => upstream.destroy())
    // A cut session's client end closes when the cut says (cutSession), not with the server's.
    upstream.on('close', () => {
      if (!this.#cutOff.has(upstream)) client.destroy()
    })
    // A delayed session was paused; a 'data' listener does not resume a stream paused by hand.
    client.resume()
  }

  async stop(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    for (const socket of this.#sockets) socket.destroy()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  /**
   * New sessions reach the server only `ms` later (0: at once again), as on a machine too busy to
   * start a backend; sessions already open are not slowed.
   */
  delaySessions(ms: number): void {
    this.#sessionDelayMs = ms
  }

  freeze(): void {
    this.#frozen = true
  }

  /**
   * New sessions are refused as PostgreSQL refuses a backend it cannot start: the startup message
   * is answered with an ErrorResponse of severity FATAL (`code`, `message`) and the socket closed,
   * as with a full disk (`XX000`, "could not write init file"). Connections open before stay as
   * they are; `stopRefusing()` lets new sessions through again.
   */
  refuseSessions(code: string, message: string): void {
    this.#refusal = fatal(code, message)
  }

  /**
   * Ends the session that sends a message holding `cut.on` (after it sent one holding
   * `cut.after`, when given), as a server or pooler ending it does: the client gets a FATAL ErrorResponse
   * (`code`, `message`), then the close. With `forward`, the message reaches the server first
   * and only its answer is lost (a COMMIT the server runs); without, the server never sees it.
   * `times` sessions are cut (1 by default).
   */
  cutSession(cut: Cut): void {
    this.#cut = { ...cut, armed: new WeakSet(), left: cut.times ?? 1 }
  }

  #cuts(chunk: Buffer, client: Socket, upstream: Socket): boolean {
    const cut = this.#cut
    if (!cut || cut.left <= 0) return false
    const text = chunk.toString('latin1')
    if (cut.after !== undefined && !cut.armed.has(client)) {
      if (text.includes(cut.after)) cut.armed.add(client)
      return false
    }
    if (!text.includes(cut.on)) return false
    cut.left--
    this.#cutOff.add(upstream)
    if (cut.forward) {
      upstream.end(chunk)
      // The server's answer, had it been passed on, would be here by now.
      setTimeout(() => client.end(fatal(cut.code, cut.message)), 100)
    } else {
      upstream.destroy()
      client.end(fatal(cut.code, cut.message))
    }
    return true
  }

  stopRefusing(): void {
    this.#refusal = undefined
  }

  /** Reads the startup packet (its length first), then answers `refusal` and closes. */
  #refuse(client: Socket, refusal: Buffer): void {
    this.refused++
    this.#sockets.add(client)
    client.on('close', () => this.#sockets.delete(client))
    client.on('error', () => client.destroy())
    let received = Buffer.alloc(0)
    client.on('data', (chunk) => {
      received = Buffer.concat([received, chunk])
      if (received.length >= 4 && received.length >= received.readInt32BE(0)) client.end(refusal)
    })
  }
}

/** A session to end mid-way (TcpProxy.cutSession). */
export interface Cut {
  readonly on: string
  readonly after?: string
  readonly forward?: boolean
  readonly times?: number
  readonly code: string
  readonly message: string
}

/** PostgreSQL's ErrorResponse of severity FATAL, after which the server closes the session. */
function fatal(code: string, message: string): Buffer {
  const field = (type: string, value: string) => Buffer.from(`${type}${value}\0`, 'utf8')
  const fields = Buffer.concat([
    field('S', 'FATAL'),
    field('V', 'FATAL'),
    field('C', code),
    field('M', message),
    Buffer.from([0]),
  ])
  const header = Buffer.alloc(5)
  header.write('E', 0)
  header.writeInt32BE(fields.length + 4, 1)
  return Buffer.concat([header, fields])
}
