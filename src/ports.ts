import { createServer } from 'node:net'
import type { Config } from './config.js'

/** A port the server cannot listen on, in one line that names its variable. */
export class PortError extends Error {}

/** Where the operations listener goes, and why not where it was asked to. */
export interface PortPlan {
  /** OPS_PORT, or 0 (any free port) when the default was taken. */
  readonly opsPort: number
  /** Set when OPS_PORT was left unset and its default is taken: the start of the warning line. */
  readonly moved?: string
}

/** The default of OPS_PORT, taken by whichever local server started first. */
export const DEFAULT_OPS_PORT = 9464

/** Resolves to the error code of listening on host:port (EADDRINUSE, EACCES…), or undefined when it is free. */
function probe(port: number, host: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(undefined)))
  })
}

/** The one line of a port the server cannot listen on. */
export function listenFailure(
  variable: 'PORT' | 'OPS_PORT',
  host: string,
  port: number,
  code: string,
): string {
  if (code === 'EADDRINUSE') {
    return `${variable} ${port} is in use (${host}:${port}): stop what listens there, or set ${variable} to a free port`
  }
  if (code === 'EACCES') return `${variable} ${port} may not be used by this user (${host}:${port}, EACCES)`
  if (code === 'EADDRNOTAVAIL') {
    return `cannot listen on ${host}:${port}: ${variable === 'PORT' ? 'HOST' : 'OPS_HOST'} is not an address of this machine (EADDRNOTAVAIL)`
  }
  return `cannot listen on ${host}:${port} (${variable}): ${code}`
}

/**
 * Checks the ports before any set-up, so that a server that cannot serve stops at once rather than
 * after creating and seeding its store:
 * - OPS_PORT set and equal to PORT, PORT taken, OPS_PORT set and taken: a PortError naming the variable;
 * - OPS_PORT unset and its default taken (a second local server): the operations listener moves to
 *   a free port, and `moved` says so.
 * The listeners themselves are opened later; a port taken in between fails there, named alike.
 */
export async function planPorts(
  config: Pick<Config, 'port' | 'host' | 'opsPort' | 'opsHost' | 'opsPortFromEnv'>,
): Promise<PortPlan> {
  const { port, host, opsPort, opsHost, opsPortFromEnv } = config
  if (opsPortFromEnv && opsPort !== 0 && opsPort === port) {
    throw new PortError(
      `OPS_PORT equals PORT (${port}): the operations listener needs a port of its own; set OPS_PORT to another port`,
    )
  }
  if (port !== 0) {
    const code = await probe(port, host)
    if (code) throw new PortError(listenFailure('PORT', host, port, code))
  }
  if (opsPort === 0) return { opsPort }
  if (!opsPortFromEnv && opsPort === port) {
    return { opsPort: 0, moved: `OPS_PORT ${opsPort} equals PORT` }
  }
  const code = await probe(opsPort, opsHost)
  if (!code) return { opsPort }
  if (!opsPortFromEnv && code === 'EADDRINUSE') return { opsPort: 0, moved: `OPS_PORT ${opsPort} is in use` }
  throw new PortError(listenFailure('OPS_PORT', opsHost, opsPort, code))
}
