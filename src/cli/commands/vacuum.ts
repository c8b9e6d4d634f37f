import { vacuum } from '../../domain/maintenance.js'
import { printResult } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`

export const registerVacuum: RegisterCommand = (program, context) => {
  program
    .command('vacuum')
    .description(
      'reclaim the space and speed left by deleted rows and by failed or cancelled imports; --full ' +
        'gives the space back to the file system (it locks the tables meanwhile)',
    )
    .option('--full', 'rewrite the tables (VACUUM FULL): smaller files, reads wait meanwhile')
    .option(...JSON_OPTION)
    .action(async (options: { full?: boolean; json?: boolean }) => {
      const result = await context.withStore((store) => vacuum(store, Boolean(options.full)))
      printResult(context, options, result, () =>
        context.stdout.write(
          `vacuumed${result.full ? ' (full)' : ''}: database ${mb(result.bytesBefore)} → ${mb(result.bytesAfter)}\n`,
        ),
      )
    })
}
