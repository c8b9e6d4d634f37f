/**
 * The store cannot serve a request just now, through no fault of the request: a maintenance lock,
 * a restart, no free connection. Rendered as 503 `service_unavailable` with `Retry-After`.
 *
 * The message goes to the client as it is: write it for the client, never from driver text.
 */
export class StoreBusyError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds = 1,
  ) {
    super(message)
    this.name = 'StoreBusyError'
  }
}
