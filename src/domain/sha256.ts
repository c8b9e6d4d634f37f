// A namespace import: a named import of `hash` fails to load on a Node without it.
import * as crypto from 'node:crypto'

/**
 * SHA-256 of a string, as text. Two run on every request (the presented key, the page's ETag):
 * `crypto.hash` does it in one call, without the Hash object `createHash` makes, about 4 µs a
 * request less on the request path (docs/design/techniques.md). Node 20.10 and 20.11, which the
 * package admits, lack it and take `createHash`: the same digest.
 */
export const sha256: (data: string, encoding: 'hex' | 'base64url') => string =
  typeof crypto.hash === 'function'
    ? (data, encoding) => crypto.hash('sha256', data, encoding)
    : (data, encoding) => crypto.createHash('sha256').update(data).digest(encoding)
