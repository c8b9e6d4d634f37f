import cliProgress from 'cli-progress'
import type { CliContext } from './context.js'

export function printJson(context: CliContext, value: unknown): void {
  context.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
}

/** A plain text table: a header row, then one row per item. */
export function printTable(
  context: CliContext,
  rows: readonly Record<string, unknown>[],
  columns: readonly string[],
): void {
  const cells = [
    columns,
    ...rows.map((row) =>
      columns.map((c) => (row[c] === null || row[c] === undefined ? '-' : String(row[c]))),
    ),
  ]
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i]?.length ?? 0)))
  for (const line of cells)
    context.stdout.write(
      `${line
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd()}\n`,
    )
}

export interface Progress {
  update(done: number): void
  stop(): void
}

/** A progress bar on stderr when it is a terminal; silent otherwise. */
export function progressBar(context: CliContext, total: number | undefined, unit: string): Progress {
  if (!context.interactive) return { update: () => {}, stop: () => {} }
  const bar = new cliProgress.SingleBar(
    {
      format: total ? `{bar} {percentage}% | {value}/{total} ${unit} | {eta}s left` : `{value} ${unit}`,
      stream: process.stderr,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  )
  bar.start(total ?? 0, 0)
  return { update: (done) => bar.update(done), stop: () => bar.stop() }
}

/** With --json, `value` as one JSON document on stdout; otherwise what `human` writes for a person. */
export function printResult(
  context: CliContext,
  options: { readonly json?: boolean | undefined },
  value: unknown,
  human: () => void,
): void {
  if (options.json) printJson(context, value)
  else human()
}
