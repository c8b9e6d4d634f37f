import { randomBytes } from 'node:crypto'
import { OperatorError } from '../operator-error.js'
import { iso } from '../queries/sql.js'
import type { Sql } from '../store/types.js'
import { activeKey } from './api-keys.js'
import type { Plan } from './plans.js'

export interface NewOrganization {
  readonly id: string
  readonly name: string
  readonly plan: Plan
  /** Created, or reused when a user has this e-mail already, as the organization's owner. */
  readonly ownerEmail?: string | undefined
}

export interface CreatedOrganization {
  readonly id: string
  readonly name: string
  readonly plan: Plan
  readonly createdAt: string | undefined
  readonly owner?: { readonly userId: string; readonly email: string }
}

export function newOrganizationId(): string {
  return `org_${randomBytes(8).toString('hex')}`
}

/** Makes the user with `email` (created when there is none) an owner of `orgId`; returns the user's id. */
async function addOwner(sql: Sql, orgId: string, email: string): Promise<string> {
  const [user] = await sql.query<{ id: string }>(
    `INSERT INTO users (id, email) VALUES ($1, $2)
     ON CONFLICT (lower(email)) DO UPDATE SET email = users.email RETURNING id`,
    [`usr_${randomBytes(8).toString('hex')}`, email],
  )
  await sql.query("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [
    orgId,
    user?.id,
  ])
  return String(user?.id)
}

/** Creates an organization (and its owner) in the caller's transaction; refuses an id in use. */
export async function createOrganization(sql: Sql, input: NewOrganization): Promise<CreatedOrganization> {
  const { id, name, plan, ownerEmail } = input
  const [exists] = await sql.query('SELECT 1 FROM organizations WHERE id = $1', [id])
  if (exists) throw new OperatorError(`organization ${id} exists already`)
  const [org] = await sql.query<{ createdAt: string }>(
    `INSERT INTO organizations (id, name, plan) VALUES ($1, $2, $3)
     RETURNING ${iso('created_at')} AS "createdAt"`,
    [id, name, plan],
  )
  const owner = ownerEmail ? { userId: await addOwner(sql, id, ownerEmail), email: ownerEmail } : undefined
  return { id, name, plan, createdAt: org?.createdAt, ...(owner ? { owner } : {}) }
}

/** Every organization with its plan and counts: members, active customers and appointments, active keys. */
export function listOrganizations(sql: Sql): Promise<Record<string, unknown>[]> {
  return sql.query<Record<string, unknown>>(
    `SELECT o.id, o.name, o.plan,
            ${iso('o.created_at')} AS "createdAt",
            (SELECT count(*)::int FROM memberships m WHERE m.org_id = o.id) AS members,
            (SELECT count(*)::int FROM customers c WHERE c.org_id = o.id AND c.is_active) AS customers,
            (SELECT count(*)::int FROM appointments a WHERE a.org_id = o.id AND a.is_active) AS appointments,
            (SELECT count(*)::int FROM api_keys k WHERE k.org_id = o.id AND ${activeKey('k')}) AS "activeKeys"
     FROM organizations o ORDER BY o.created_at, o.id`,
  )
}
