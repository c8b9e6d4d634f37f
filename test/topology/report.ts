import { writeSync } from 'node:fs'

/** Straight to the terminal: vitest keeps console output of passing tests to itself otherwise. */
export function say(text: string): void {
  writeSync(1, `${text}\n`)
}

export type Verdict = 'pass' | 'FAIL' | 'skipped'

export interface Row {
  readonly check: string
  readonly figures: string
  verdict: Verdict
}

/** The summary table printed at the end of the run, one row per proof. */
export class Summary {
  readonly rows: Row[] = []

  add(check: string, figures: string, verdict: Verdict): Row {
    const row = { check, figures, verdict }
    this.rows.push(row)
    say(`  [${verdict}] ${check}: ${figures}`)
    return row
  }

  print(title: string): void {
    const widths = [
      Math.max(5, ...this.rows.map((row) => row.check.length)),
      Math.max(7, ...this.rows.map((row) => row.verdict.length)),
    ] as const
    const line = (check: string, verdict: string, figures: string) =>
      `| ${check.padEnd(widths[0])} | ${verdict.padEnd(widths[1])} | ${figures}`
    say(`\n${title}\n`)
    say(line('check', 'verdict', 'figures'))
    say(`|${'-'.repeat(widths[0] + 2)}|${'-'.repeat(widths[1] + 2)}|${'-'.repeat(40)}`)
    for (const row of this.rows) say(line(row.check, row.verdict, row.figures))
    say('')
  }
}

export const ms = (value: number) => `${Math.round(value)} ms`
export const n = (value: number) => value.toLocaleString('en-US')
