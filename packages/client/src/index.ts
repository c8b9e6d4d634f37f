export {
  type AllOptions,
  type Appointment,
  type AppointmentFilters,
  type AppointmentListParams,
  type AppointmentStatus,
  AutoPaginator,
  CLIENT_VERSION,
  type Customer,
  type CustomerListParams,
  type NotModified,
  Openbook,
  type OpenbookOptions,
  type Page,
  type Pagination,
} from './client.js'
export {
  ApiError,
  AuthenticationError,
  BadRequestError,
  InvalidParametersError,
  KeyExpiredError,
  KeyRevokedError,
  NetworkError,
  OpenbookError,
  PaginationError,
  ServerError,
  TimeoutError,
  UsageError,
  type ValidationIssue,
} from './errors.js'
export type { components, operations, paths } from './generated/api.js'
export type { AutoPage, Cursor, PaginationStats } from './paginate.js'
export {
  BATCH_RETRY,
  type ClientEvent,
  type ConditionalOptions,
  type PerRequestOptions,
  type RetryOptions,
} from './transport.js'
export { APPOINTMENT_STATUSES } from './validate.js'
