import { z } from 'zod'
import { listAppointments } from '../../../queries/appointments.js'
import {
  dateTimeParam,
  defineQuery,
  epochNanoseconds,
  idParam,
  limitParam,
  offsetParam,
  PAGINATION_READERS,
  pageOf,
  readDateTime,
  toMicroseconds,
} from '../../../schemas/query.js'
import { APPOINTMENT_STATUSES, appointmentSchema } from '../../../schemas/resources.js'
import type { ListRoute, QueryOutput } from './list-route.js'

export const appointmentsQuery = defineQuery({
  schema: z.object({
    limit: limitParam,
    offset: offsetParam,
    status: z
      .enum(APPOINTMENT_STATUSES, { invalid_type_error: 'status must be one of the statuses, given once' })
      .optional()
      .describe('Only appointments in this status'),
    customerId: idParam('customerId', 'Only appointments of this customer'),
    staffId: idParam('staffId', 'Only appointments of this staff member'),
    startDate: dateTimeParam(
      'startDate',
      'Inclusive lower bound on the start time; up to 9 fractional-second digits, compared to the microsecond',
    ),
    endDate: dateTimeParam(
      'endDate',
      'Inclusive upper bound on the start time; up to 9 fractional-second digits, compared to the microsecond',
    ),
  }),
  readers: { ...PAGINATION_READERS, startDate: readDateTime, endDate: readDateTime },
  check: ({ startDate, endDate }) => {
    if (!startDate || !endDate) return undefined
    // Compared as sent, to the nanosecond: two bounds within one microsecond are not reversed.
    const start = epochNanoseconds(startDate)
    const end = epochNanoseconds(endDate)
    return start !== undefined && end !== undefined && end < start
      ? { path: 'endDate', message: 'endDate must not be before startDate' }
      : undefined
  },
  // Start times are kept to the microsecond: the lower bound rounds up and the upper bound down,
  // so that each still selects exactly the start times it names.
  finish: ({ startDate, endDate, status, customerId, staffId, ...page }) => ({
    page: pageOf(page),
    filters: {
      status,
      customerId,
      staffId,
      startDate: startDate === undefined ? undefined : toMicroseconds(startDate, 'up'),
      endDate: endDate === undefined ? undefined : toMicroseconds(endDate, 'down'),
    },
  }),
})

export const appointmentsRoute: ListRoute<QueryOutput<typeof appointmentsQuery>, typeof appointmentSchema> = {
  operationId: 'listAppointments',
  path: '/appointments',
  summary: 'List appointments',
  description:
    "Active appointments of the key's organization, latest start first (start descending, then id descending). " +
    'Filters combine with AND; startDate and endDate bound the start time only, both inclusive.',
  query: appointmentsQuery,
  item: appointmentSchema,
  itemName: 'Appointment',
  tag: 'Appointments',
  tagDescription: "The organization's active appointments (reservations, bookings)",
  example: {
    id: 'apt_01HZX9',
    start: '2026-03-02T10:00:00.000Z',
    end: '2026-03-02T10:45:00.000Z',
    orgId: 'org_demo',
    customerId: 'cus_01HZX3',
    staffId: 'stf_01',
    serviceId: 'svc_cut',
    status: 'confirmed',
    locationType: 'in_person',
    priceCents: 4500,
    currency: 'EUR',
    note: null,
    paymentStatus: 'unpaid',
    amountPaidCents: null,
    paymentKind: null,
    paymentId: null,
    invoiceId: null,
    requiresPayment: false,
    confirmedAfterPayment: false,
    dayKey: '2026-03-02',
    createdAt: '2026-02-20T08:00:00.000Z',
    updatedAt: '2026-02-20T08:00:00.000Z',
  },
  list: (store, sql, tenant, { page, filters }) => listAppointments(store, sql, tenant, page, filters),
}
