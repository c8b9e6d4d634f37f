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
  #refusal: Buffer | undefined
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
        if (!this.#frozen) upstream.write(chunk)
      })
      upstream.on('data', (chunk) => {
        if (!this.#frozen) client.write(chunk)
      })
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
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

  async stop(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    for (const socket of this.#sockets) socket.destroy()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
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
    this.#refusal = Buffer.concat([header, fields])
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
