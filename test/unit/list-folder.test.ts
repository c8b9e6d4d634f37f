import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { ListFolder } from '../../src/domain/list-folder.js'
import type { FoldReport } from '../../src/store/types.js'

const REPORT: FoldReport = { folded: 1, mostPending: 12, allPending: 30, failed: 0 }

/** A logger that keeps each line as `level: message`. */
function recordingLog() {
  const lines: string[] = []
  const at = (level: string) => (_fields: unknown, message: string) => lines.push(`${level}: ${message}`)
  const log = { info: at('info'), warn: at('warn'), error: at('error') }
  return { lines, log: log as unknown as ConstructorParameters<typeof ListFolder>[1] }
}

const refused = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })

describe('the background fold (ListFolder)', () => {
  it('says an outage once, however many folds it fails, and once that folds run again', async () => {
    const outcomes = [refused, refused, refused, null, refused, null]
    const { lines, log } = recordingLog()
    const seen: string[] = []
    const folder = new ListFolder(
      async () => {
        const fail = outcomes.shift()
        if (fail) throw fail()
        return REPORT
      },
      log,
      {
        everyMs: 1_000,
        observer: {
          listsFolded: (report) => seen.push(`folded ${report.mostPending}`),
          listFoldFailed: () => seen.push('failed'),
        },
      },
    )
    for (let i = 0; i < 6; i++) await folder.once()
    expect(seen).toEqual(['failed', 'failed', 'failed', 'folded 12', 'failed', 'folded 12'])
    expect(lines).toEqual([
      'warn: list folds: a fold failed; trying again, said once until one succeeds',
      'info: list folds: running again',
      'warn: list folds: a fold failed; trying again, said once until one succeeds',
      'info: list folds: running again',
    ])
  })

  it("says once that a list's fold failed in the database while the others were folded, and once that all fold again", async () => {
    const failedOne: FoldReport = { ...REPORT, failed: 1, failure: 'org_1/appointments: an injected fault' }
    const reports = [failedOne, failedOne, REPORT, failedOne]
    const { lines, log } = recordingLog()
    const seen: number[] = []
    const folder = new ListFolder(async () => reports.shift() ?? REPORT, log, {
      everyMs: 1_000,
      observer: { listsFolded: (report) => seen.push(report.failed), listFoldFailed: () => seen.push(-1) },
    })
    for (let i = 0; i < 4; i++) await folder.once()
    expect(seen).toEqual([1, 1, 0, 1])
    expect(lines).toEqual([
      expect.stringMatching(/^warn: list folds: a list's fold failed in the database/),
      'info: list folds: running again',
      expect.stringMatching(/^warn: list folds: a list's fold failed in the database/),
    ])
  })

  it('names the grant when the reader may not fold', async () => {
    const { lines, log } = recordingLog()
    const folder = new ListFolder(
      async () => {
        throw Object.assign(new Error('permission denied for function list_fold_pending'), { code: '42501' })
      },
      log,
      { everyMs: 1_000 },
    )
    await folder.once()
    await folder.once()
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^error: .*GRANT EXECUTE ON FUNCTION list_fold_pending\(\) TO openbook_reader/)
  })

  it('runs one fold at a time, every interval after the last ended, and stops after the one in flight', async () => {
    let running = 0
    let most = 0
    let calls = 0
    let release: (() => void) | undefined
    const folder = new ListFolder(
      async () => {
        calls++
        running++
        most = Math.max(most, running)
        await new Promise<void>((resolve) => {
          release = resolve
        })
        running--
        return REPORT
      },
      recordingLog().log,
      { everyMs: 20 },
    )
    folder.start()
    await sleep(60)
    // The first fold hangs: no second one starts beside it.
    expect(calls).toBe(1)
    const stopped = folder.stop()
    let done = false
    void stopped.then(() => {
      done = true
    })
    await sleep(30)
    expect(done).toBe(false)
    release?.()
    await stopped
    await sleep(60)
    expect(calls).toBe(1)
    expect(most).toBe(1)
  })
})
