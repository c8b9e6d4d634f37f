import { appointmentsPage } from '../../../queries/appointments.js'
import { fetchVersionedPage } from '../../../queries/page.js'
import { APPOINTMENT_LIST, listQuery } from '../../../schemas/filters.js'
import { appointmentSchema } from '../../../schemas/resources.js'
import type { ListRoute, QueryOutput } from './list-route.js'

/** Paging and the filters of `APPOINTMENT_LIST`, each described once there. */
export const appointmentsQuery = listQuery(APPOINTMENT_LIST)

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
  list: (store, sql, tenant, { page, filters }, known) =>
    fetchVersionedPage(store, sql, appointmentsPage(tenant, filters), page, known),
}
