import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'

/**
 * Compressed answers (issue 31, item 9): a page of 100 customers is about 50 KB of JSON and an
 * organization's whole list about 150 MB; gzip makes them several times smaller. `@fastify/compress`
 * picks the encoding from Accept-Encoding (q-values included), compresses only bodies of at least
 * `threshold` bytes (so error bodies, all smaller, stay as they are), and sets Content-Encoding and
 * Vary. The levels are chosen for CPU (bench/compression.ts, README "Compression"): gzip level 4
 * and brotli quality 4 save nearly as many bytes as the defaults (6 and 11) at a fraction of the CPU.
 */
export const COMPRESSION = {
  encodings: ['br', 'gzip'] as const,
  gzipLevel: 4,
  brotliQuality: 4,
  /** Bodies below this many bytes go as they are: a 401 or 400 body, the one-row page. */
  threshold: 1024,
}

export async function registerCompression(app: FastifyInstance): Promise<void> {
  await app.register(compress, {
    encodings: [...COMPRESSION.encodings],
    threshold: COMPRESSION.threshold,
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
}
