import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance, onSendHookHandler } from 'fastify'

/**
 * Compressed answers (docs/integrators/compressed-pages.md). `@fastify/compress` picks the encoding
 * from Accept-Encoding (q-values included), compresses only bodies of at least `threshold` bytes (so
 * error bodies, all smaller, stay as they are), and sets Content-Encoding and Vary. brotli 1 and
 * gzip 1 are chosen for CPU: a third of gzip's default level's for 12-17 % more bytes
 * (bench/RESULTS.md, Compression); brotli 1 goes first where the client takes it.
 */
export const COMPRESSION = {
  encodings: ['br', 'gzip'] as const,
  gzipLevel: 1,
  brotliQuality: 1,
  /** Bodies below this many bytes go as they are: a 401 or 400 body, the one-row page. */
  threshold: 1024,
  /**
   * Bodies up to this many bytes (every page: 100 items of the longest fields are far below it)
   * are compressed in one call, sent with their Content-Length in one write. The plugin's default
   * on a two-core host (8 KB) streamed every page through a zlib stream instead, chunk by chunk,
   * for more of Node's CPU and the same bytes (bench/RESULTS.md, Compression); a page is too
   * little work at these levels to be worth the thread pool.
   */
  inOneCallUpTo: 4 * 1024 * 1024,
}

/**
 * Where a handler may leave a function on its reply to be told the content-coding its body went in
 * (`identity` when not compressed), once it is known: after compression, before the headers go.
 * A list page's strong ETag differs by coding (routes/public/v1/list-route.ts).
 */
export const ON_CODING = Symbol('onCoding')
export type CodingListener = { [ON_CODING]?: (coding: string) => void }

export async function registerCompression(app: FastifyInstance): Promise<void> {
  await app.register(compress, {
    encodings: [...COMPRESSION.encodings],
    threshold: COMPRESSION.threshold,
    syncThreshold: COMPRESSION.inOneCallUpTo,
    zlibOptions: { level: COMPRESSION.gzipLevel },
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: COMPRESSION.brotliQuality } },
    // The API reads no request body: nothing to decompress.
    globalDecompression: false,
  })
  // Every answer of a path may vary by Accept-Encoding, also one sent uncompressed (a cache keeps
  // `/openapi.json` for 5 minutes): said on all of them, not only on the compressed ones.
  app.addHook('onSend', (_request, reply, payload, done) => {
    const vary = reply.getHeader('vary')
    if (vary === undefined) reply.header('vary', 'accept-encoding')
    done(null, payload)
  })
  // The plugin compresses in an onSend hook it adds to each route as the route is declared; this
  // one is added after it, so it runs once the coding is decided.
  const tellCoding: onSendHookHandler = (_request, reply, payload, done) => {
    const coding = reply.getHeader('content-encoding')
    ;(reply as CodingListener)[ON_CODING]?.(typeof coding === 'string' ? coding : 'identity')
    done(null, payload)
  }
  app.addHook('onRoute', (route) => {
    const hooks = route.onSend === undefined ? [] : ([] as onSendHookHandler[]).concat(route.onSend)
    route.onSend = [...hooks, tellCoding]
  })
}
