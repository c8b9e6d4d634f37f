import { customersPage } from '../../../queries/customers.js'
import { fetchVersionedPage } from '../../../queries/page.js'
import { paginationQuery } from '../../../schemas/query.js'
import { customerSchema } from '../../../schemas/resources.js'
import type { ListRoute, QueryOutput } from './list-route.js'

export const customersRoute: ListRoute<QueryOutput<typeof paginationQuery>, typeof customerSchema> = {
  operationId: 'listCustomers',
  path: '/customers',
  summary: 'List customers',
  description:
    "Active customers of the key's organization, newest first (createdAt descending, then id descending).",
  query: paginationQuery,
  item: customerSchema,
  itemName: 'Customer',
  tag: 'Customers',
  tagDescription: "The organization's active customers",
  example: {
    id: 'cus_01HZX3',
    firstName: 'Ada',
    lastName: 'Lovelace',
    displayName: 'Ada Lovelace',
    email: 'ada@example.com',
    phone: '+44 20 7946 0001',
    preferredContactMethod: 'email',
    marketingConsent: false,
    country: 'GB',
    isActive: true,
    createdAt: '2026-01-15T09:30:00.000Z',
    updatedAt: '2026-02-01T12:00:00.000Z',
  },
  list: (store, sql, tenant, query, known) =>
    fetchVersionedPage(store, sql, customersPage(tenant), query, known),
}
