import type { Command } from 'commander'
import type { CliContext } from '../context.js'

/** Adds one command (or one group of subcommands) to `program`; its actions reach the store only through `context`. */
export type RegisterCommand = (program: Command, context: CliContext) => void

/** The option every command has. */
export const JSON_OPTION = ['--json', 'print one JSON document'] as const
