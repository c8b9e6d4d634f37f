import { setTimeout as sleep } from 'node:timers/promises'
import autocannonUntyped from 'autocannon'

/** The parts of autocannon 9's API used here (bench/autocannon.d.ts declares fewer). */
interface Result {
  readonly duration: number
}
interface Request {
  readonly method: 'GET'
  readonly path: string
  readonly headers: Record<string, string>
  readonly onResponse: (status: number, body: string) => void
}
interface Instance extends PromiseLike<Result> {
  on(event: 'reqError', listener: (error: Error) => void): void
  on(
    event: 'response',
    listener: (client: unknown, status: number, bytes: number, responseTime: number) => void,
  ): void
  stop(): void
}
const autocannon = autocannonUntyped as unknown as (options: {
  url: string
  connections: number
  duration: number
  overallRate: number
  ignoreCoordinatedOmission: boolean
  timeout: number
  requests: Request[]
}) => Instance

/** A request of the load and the page the primary says it must return. */
export interface Expected {
  readonly path: string
  readonly key: string
  readonly ids: readonly string[]
  readonly total: number
}

export interface Failure {
  /** When it was sent and when it ended, in milliseconds since the load started. */
  readonly start: number
  readonly end: number
  readonly what: string
}

export interface LoadReport {
  readonly name: string
  readonly seconds: number
  readonly requests: number
  readonly ok: number
  /** 200s whose ids or total differ from the primary's. */
  readonly wrong: number
  readonly failures: readonly Failure[]
  /** Response times (from sending the request), in milliseconds. */
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly firstWrong?: string
  /** Requests sent at or before `at` (+ `slack` ms) and answered after it. */
  inFlightAt(at: number, slack?: number): number
  /** Every answered request: [sent, answered], ms since the load started. */
  readonly spans: readonly (readonly [number, number])[]
  /** When each 200 was answered, ms since the load started. */
  readonly okEnds: readonly number[]
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN
  return (
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN
  )
}

/**
 * A bounded read load through the load balancer: `rate` requests per second over `connections`
 * keep-alive connections, cycling through `expected`. Every 200 is parsed and its ids and total
 * compared with what the primary answered directly; anything else is a failure, with the times it
 * was sent and answered. `during` runs alongside (the event under test), on the same clock; the
 * load ends after both.
 *
 * autocannon's rate limit lets each connection send its quota for the second back to back from
 * the start of every second, then wait: with one instance, all connections burst together and the
 * load is idle most of each second (an event would often meet no request). So each connection is an
 * autocannon instance of its own, with its share of the rate, started 1/connections of a second
 * after the previous one: the bursts are spread evenly over every second.
 */
export async function runLoad(options: {
  readonly name: string
  readonly url: string
  readonly expected: readonly Expected[]
  readonly seconds: number
  readonly rate: number
  readonly connections: number
  readonly during?: (elapsed: () => number) => Promise<void>
}): Promise<LoadReport> {
  const started = performance.now()
  const elapsed = () => performance.now() - started
  /** Every answered request: [sent, answered], ms since the start. */
  const spans: [number, number][] = []
  const okEnds: number[] = []
  const durations: number[] = []
  const failures: Failure[] = []
  /** The body of the last non-200 answer: autocannon calls onResponse just before 'response'. */
  let lastErrorBody = ''
  let ok = 0
  let wrong = 0
  let firstWrong: string | undefined
  const requests: Request[] = options.expected.map((expected) => ({
    method: 'GET',
    path: expected.path,
    headers: { authorization: `Bearer ${expected.key}` },
    onResponse(status, body) {
      if (status !== 200) {
        lastErrorBody = body.slice(0, 160)
        return
      }
      try {
        const page = JSON.parse(body) as { data: { id: string }[]; pagination: { total: number } }
        const ids = page.data.map((item) => item.id)
        if (page.pagination.total === expected.total && ids.join(',') === expected.ids.join(',')) ok++
        else {
          wrong++
          firstWrong ??= `${expected.path}: total ${page.pagination.total} (primary ${expected.total}), ids ${ids.slice(0, 3).join(',')}... (primary ${expected.ids.slice(0, 3).join(',')}...)`
        }
      } catch (error) {
        wrong++
        firstWrong ??= `${expected.path}: ${(error as Error).message}`
      }
    },
  }))
  const lane = async (index: number): Promise<void> => {
    await sleep((index * 1000) / options.connections)
    const share =
      Math.floor(options.rate / options.connections) + (index < options.rate % options.connections ? 1 : 0)
    // Each lane starts at another request of the cycle.
    const offset = index % requests.length
    const instance = autocannon({
      url: options.url,
      connections: 1,
      duration: options.seconds,
      overallRate: share,
      // autocannon's correction for coordinated omission takes the interval in the wrong unit; the
      // response times below are measured per request instead.
      ignoreCoordinatedOmission: true,
      timeout: 10,
      requests: [...requests.slice(offset), ...requests.slice(0, offset)],
    })
    instance.on('response', (_client, status, _bytes, responseTime) => {
      const end = elapsed()
      const start = end - responseTime
      spans.push([start, end])
      durations.push(responseTime)
      if (status !== 200) failures.push({ start, end, what: `${status} ${lastErrorBody}` })
      else okEnds.push(end)
    })
    instance.on('reqError', (error) => {
      const end = elapsed()
      // A time-out was sent `timeout` seconds before; of a connection error the start is unknown,
      // so it counts as sent at its end (never as in flight at an earlier event).
      const start = error.message.includes('timed out') ? end - 10_000 : end
      failures.push({ start, end, what: `error ${error.message}` })
    })
    await instance
  }
  await Promise.all([
    ...Array.from({ length: options.connections }, (_, i) => lane(i)),
    options.during?.(elapsed),
  ])
  const seconds = Math.round(elapsed() / 10) / 100
  const sorted = Float64Array.from(durations).sort()
  return {
    name: options.name,
    seconds,
    requests: ok + wrong + failures.length,
    ok,
    wrong,
    failures,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.at(-1) ?? Number.NaN,
    ...(firstWrong ? { firstWrong } : {}),
    inFlightAt: (at, slack = 0) => spans.filter(([start, end]) => start <= at + slack && end > at).length,
    spans,
    okEnds,
  }
}
