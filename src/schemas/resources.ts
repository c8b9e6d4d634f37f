import { z } from 'zod'

export const APPOINTMENT_STATUSES = [
  'scheduled',
  'confirmed',
  'checked_in',
  'no_show',
  'cancelled',
  'completed',
] as const
export const LOCATION_TYPES = ['in_person', 'online', 'phone', 'customer_address'] as const
export const PAYMENT_STATUSES = [
  'not_required',
  'unpaid',
  'pending',
  'partially_paid',
  'paid',
  'refunded',
  'failed',
] as const
export const PAYMENT_KINDS = ['card', 'cash', 'online', 'bank_transfer', 'gift_card', 'other'] as const
export const CONTACT_METHODS = ['email', 'phone', 'sms', 'whatsapp', 'none'] as const

const timestamp = z.string().datetime().describe('ISO-8601 UTC date-time with milliseconds')
const isoDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/)
  .describe('Calendar date, YYYY-MM-DD')

export const customerSchema = z
  .object({
    id: z.string(),
    supportId: z.string().optional(),
    firstName: z.string().optional(),
    lastName: z.string().optional(),
    displayName: z.string().optional(),
    email: z.string().optional(),
    phone: z.string().optional(),
    primaryPhone: z.string().optional(),
    secondaryPhone: z.string().optional(),
    preferredContactMethod: z.enum(CONTACT_METHODS).optional(),
    dateOfBirth: isoDate.optional(),
    gender: z.string().optional(),
    notes: z.string().optional().describe('Confidential free text'),
    marketingConsent: z.boolean().optional(),
    addressLine1: z.string().optional(),
    city: z.string().optional(),
    region: z.string().optional(),
    postalCode: z.string().optional(),
    country: z
      .string()
      .regex(/^[A-Z]{2}$/)
      .optional()
      .describe('ISO 3166-1 alpha-2'),
    preferredStaffId: z.string().optional(),
    isActive: z.boolean(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .strict()
  .describe('A customer; optional fields are omitted when empty')

export const appointmentSchema = z
  .object({
    id: z.string(),
    start: timestamp,
    end: timestamp,
    orgId: z.string().optional(),
    customerId: z.string().optional(),
    staffId: z.string().optional(),
    serviceId: z.string().optional(),
    status: z.enum(APPOINTMENT_STATUSES).optional(),
    locationType: z.enum(LOCATION_TYPES).optional(),
    resourceId: z.string().optional().describe('Opaque id of the booked room, chair or equipment'),
    priceCents: z.number().int().optional(),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/)
      .optional()
      .describe('ISO 4217 code'),
    note: z.string().nullable().optional(),
    paymentStatus: z.enum(PAYMENT_STATUSES).optional(),
    amountPaidCents: z.number().int().nullable().optional(),
    paymentKind: z.enum(PAYMENT_KINDS).nullable().optional(),
    paymentId: z.string().nullable().optional(),
    invoiceId: z.string().nullable().optional(),
    requiresPayment: z.boolean().optional(),
    confirmedAfterPayment: z.boolean().optional(),
    dayKey: isoDate.optional().describe('UTC calendar day of the start, YYYY-MM-DD'),
    createdAt: timestamp.optional(),
    updatedAt: timestamp.optional(),
  })
  .strict()
  .describe('An appointment (reservation, booking)')

export type Customer = z.infer<typeof customerSchema>
export type Appointment = z.infer<typeof appointmentSchema>
