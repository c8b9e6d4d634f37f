/** Quoted text in driver messages is the offending value or a query literal: never logged. */
export function redact(text: unknown): string | undefined {
  return typeof text === 'string' ? text.replace(/"[^"]*"|'[^']*'/g, '"…"') : undefined
}

/**
 * What an unexpected error may put in a log line: its kind, code and redacted message and stack.
 * Never a driver's query text, parameters, context or detail, which can hold query values or rows,
 * nor what a driver hangs on its errors (node-postgres: the client, with its prepared statements).
 */
export function loggable(error: unknown): Record<string, unknown> {
  if (typeof error !== 'object' || error === null) return { type: typeof error }
  const { name, code, routine, message, stack } = error as Partial<Error> & {
    code?: unknown
    routine?: unknown
  }
  return {
    type: name,
    ...(typeof code === 'string' ? { code } : {}),
    ...(typeof routine === 'string' ? { routine } : {}),
    message: redact(message),
    stack: redact(stack),
  }
}

/**
 * pino serializers for every logger of the server: an error logged under `err` (or as the first
 * argument, which pino puts there) becomes `loggable(error)`, whoever logs it.
 */
export const LOG_SERIALIZERS = { err: loggable }
