import { Command, CommanderError } from 'commander'
import { errorLine, failureReason } from '../operator-error.js'
import type { RegisterCommand } from './commands/command.js'
import { registerImport } from './commands/import.js'
import { registerKeys } from './commands/keys.js'
import { registerMigrate } from './commands/migrate.js'
import { registerOrgs } from './commands/orgs.js'
import { registerSeed } from './commands/seed.js'
import { registerVacuum } from './commands/vacuum.js'
import type { CliContext } from './context.js'
import { EXIT_OUTCOME_UNKNOWN, OutcomeUnknownError } from './outcome.js'

/** The commands, in the order `openbook --help` lists them. */
const COMMANDS: readonly RegisterCommand[] = [
  registerMigrate,
  registerImport,
  registerOrgs,
  registerKeys,
  registerVacuum,
  registerSeed,
]

/** The `openbook` command line; every action goes through `context`, so it runs the same locally or in a server. */
export function buildProgram(context: CliContext): Command {
  const program = new Command('openbook')
    .description('Operate an openbook API: schema, data, organizations and API keys')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => context.stdout.write(text),
      writeErr: (text) => context.stderr.write(text),
    })
    .showHelpAfterError('(run openbook --help for usage)')
  for (const register of COMMANDS) register(program, context)
  return program
}

/**
 * Runs one command line; returns the exit status (0 success, 1 failure, 2 usage, 3 a write whose
 * connection was lost while it committed: it may or may not have been written).
 */
export async function runCli(argv: readonly string[], context: CliContext): Promise<number> {
  const program = buildProgram(context)
  try {
    if (argv.length === 0) {
      program.outputHelp({ error: true })
      return 2
    }
    await program.parseAsync([...argv], { from: 'user' })
    return 0
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.code === 'commander.helpDisplayed' || error.code === 'commander.version' ? 0 : 2
    }
    context.stderr.write(errorLine(failureReason(error)))
    return error instanceof OutcomeUnknownError ? EXIT_OUTCOME_UNKNOWN : 1
  }
}
