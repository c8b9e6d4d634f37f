import { migrate } from '../../store/schema/migrate.js'
import { printResult } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

export const registerMigrate: RegisterCommand = (program, context) => {
  program
    .command('migrate')
    .description(
      'apply pending migrations, restore the grants and policies the schema defines; safe to run again',
    )
    .option(...JSON_OPTION)
    .action(async (options: { json?: boolean }) => {
      const result = await context.withStore((store) => migrate(store), {
        migrating: true,
        // One transaction: a run after a lost one applies what that one did not commit.
        idempotent: true,
      })
      printResult(context, options, result, () => {
        // One line per repair (none when all was in place), then the version.
        for (const line of result.repaired) context.stdout.write(`repaired: ${line}\n`)
        context.stdout.write(
          result.applied.length
            ? `applied ${result.applied.join(', ')}; schema at version ${result.version}\n`
            : `schema already at version ${result.version}\n`,
        )
      })
    })
}
