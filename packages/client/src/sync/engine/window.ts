/** The window of a pass on the appointments' start: fixed dates, or a rolling window as of now. */
import { SyncUsageError } from './errors.js'
import type { PassWindow, SyncOptions } from './options.js'

const WINDOW = /^([+-]?\d{1,5})([dh])\.\.([+-]?\d{1,5})([dh])$/
const UNIT_MS = { d: 86_400_000, h: 3_600_000 } as const

/** The window a new pass reads: `since`/`until`, or the rolling `window` as of `now`. */
export function windowOf(
  options: Pick<SyncOptions, 'resource' | 'since' | 'until' | 'window' | 'now'>,
): PassWindow {
  if (options.resource === 'customers' && (options.since || options.until || options.window))
    throw new SyncUsageError('--since, --until and --window apply to appointments only')
  if (options.window === undefined) return { since: options.since, until: options.until }
  if (options.since || options.until) throw new SyncUsageError('give --window or --since/--until, not both')
  const match = WINDOW.exec(options.window)
  if (!match)
    throw new SyncUsageError('--window must look like -90d..+30d: days (d) or hours (h) from now, twice')
  const now = options.now === undefined ? Date.now() : new Date(options.now).getTime()
  if (Number.isNaN(now)) throw new SyncUsageError('--now must be an ISO-8601 date-time')
  const at = (amount: string | undefined, unit: string | undefined) =>
    new Date(now + Number(amount) * UNIT_MS[unit as keyof typeof UNIT_MS]).toISOString()
  const since = at(match[1], match[2])
  const until = at(match[3], match[4])
  if (since >= until) throw new SyncUsageError('--window must start before it ends')
  return { since, until }
}

/** Whether `start` lies in the window (inclusive, as the API's filters). */
export function inWindow(start: string, window: PassWindow): boolean {
  const time = Date.parse(start)
  return (
    (window.since === undefined || time >= Date.parse(window.since)) &&
    (window.until === undefined || time <= Date.parse(window.until))
  )
}

export const windowFilters = (window: PassWindow) => ({
  ...(window.since ? { startDate: window.since } : {}),
  ...(window.until ? { endDate: window.until } : {}),
})

export const sameWindow = (a: PassWindow, b: PassWindow) => a.since === b.since && a.until === b.until
