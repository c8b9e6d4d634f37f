import { createOrganization, listOrganizations, newOrganizationId } from '../../domain/organizations.js'
import { PLANS } from '../../domain/plans.js'
import { ensureEmail, ensurePlan, ensureText } from '../options.js'
import { writing } from '../outcome.js'
import { printResult, printTable } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

interface CreateOptions {
  readonly name: string
  readonly plan: string
  readonly id?: string
  readonly ownerEmail?: string
  readonly json?: boolean
}

const LIST_COLUMNS = ['id', 'name', 'plan', 'members', 'customers', 'appointments', 'activeKeys'] as const

export const registerOrgs: RegisterCommand = (program, context) => {
  const orgs = program.command('orgs').description('organizations')
  orgs
    .command('create')
    .description('create an organization, and with --owner-email its owner')
    .requiredOption('--name <name>', 'display name')
    .requiredOption('--plan <plan>', PLANS.join(' | '))
    .option('--id <id>', 'organization id (default: generated)')
    .option('--owner-email <email>', 'create or reuse this user as the owner')
    .option(...JSON_OPTION)
    .action(async (options: CreateOptions) => {
      const name = ensureText('--name', options.name, 200)
      const plan = ensurePlan(options.plan)
      const id = options.id === undefined ? newOrganizationId() : ensureText('--id', options.id, 128)
      const ownerEmail = ensureEmail(options.ownerEmail)
      const change = { what: `the organization ${id}`, check: 'see `openbook orgs list`' }
      const created = await context.withStore((store) =>
        writing(change, () => store.admin((sql) => createOrganization(sql, { id, name, plan, ownerEmail }))),
      )
      printResult(context, options, created, () =>
        context.stdout.write(
          `created organization ${created.id} (${plan})${created.owner ? ` owned by ${created.owner.email}` : ''}\n`,
        ),
      )
    })

  orgs
    .command('list')
    .description('organizations with plan and counts')
    .option(...JSON_OPTION)
    .action(async (options: { json?: boolean }) => {
      const rows = await context.withStore((store) => store.admin((sql) => listOrganizations(sql)), {
        idempotent: true,
      })
      printResult(context, options, rows, () => printTable(context, rows, LIST_COLUMNS))
    })
}
