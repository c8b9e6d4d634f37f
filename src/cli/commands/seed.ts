import { afterLoad } from '../../domain/maintenance.js'
import { OperatorError } from '../../operator-error.js'
import { seedSynthetic } from '../../seed/run.js'
import type { CliContext } from '../context.js'
import { count } from '../options.js'
import { printResult, progressBar } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

interface SeedOptions {
  readonly orgs: number
  readonly customers: number
  readonly appointments: number
  readonly seed: number
  readonly json?: boolean
}

async function seed(context: CliContext, options: SeedOptions): Promise<void> {
  if (options.orgs < 1) throw new OperatorError('--orgs must be at least 1')
  const total = options.customers + options.appointments
  const progress = progressBar(context, total, 'rows')
  const started = performance.now()
  try {
    const result = await context.withStore(async (store) => {
      const seeded = await seedSynthetic(store, options, ({ done }) => progress.update(done))
      await afterLoad(store)
      return seeded
    })
    progress.stop()
    const elapsed = (performance.now() - started) / 1000
    const seconds = Math.round(elapsed * 10) / 10
    const rowsPerSecond = Math.round(total / elapsed)
    printResult(
      context,
      options,
      { counts: result.counts, orgIds: result.orgIds, seconds, rowsPerSecond },
      () =>
        context.stdout.write(
          `seeded ${options.orgs} organizations, ${options.customers} customers, ${options.appointments} appointments in ${seconds}s (${rowsPerSecond} rows/s)\n`,
        ),
    )
  } finally {
    progress.stop()
  }
}

export const registerSeed: RegisterCommand = (program, context) => {
  program
    .command('seed')
    .description('bulk synthetic data: skewed organization sizes, appointments over years')
    .requiredOption('--orgs <n>', 'organizations', count('--orgs'))
    .requiredOption('--customers <n>', 'customers in all', count('--customers'))
    .requiredOption('--appointments <n>', 'appointments in all', count('--appointments'))
    .option('--seed <s>', 'random seed: the same seed gives the same data', count('--seed'), 1)
    .option(...JSON_OPTION)
    .action((options: SeedOptions) => seed(context, options))
}
