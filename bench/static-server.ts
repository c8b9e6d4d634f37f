/**
 * The latency floor of this machine and load generator: a bare node:http server that answers
 * every request with the same 25 KB JSON body, doing no work.
 * PORT=… node --import tsx bench/static-server.ts
 */
import { createServer } from 'node:http'

const body = JSON.stringify({
  data: Array.from({ length: 50 }, (_, i) => ({ id: `cus_${i}`, note: 'x'.repeat(450) })),
  pagination: { limit: 50, offset: 0, total: 50, hasMore: false },
})
const server = createServer((_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  response.end(body)
})
server.listen(Number(process.env.PORT ?? 3101), '127.0.0.1')
process.on('SIGTERM', () => process.exit(0))
