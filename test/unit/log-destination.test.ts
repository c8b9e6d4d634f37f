import { execFileSync } from 'node:child_process'
import { closeSync, constants, mkdtempSync, openSync, readSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { pino } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { type LogDestination, logDestination, warnOfDroppedLines } from '../../src/log-destination.js'

/** Everything the pipe holds now (its read end is non-blocking: EAGAIN once it is empty). */
function drain(fd: number): string {
  const chunk = Buffer.alloc(65_536)
  let text = ''
  for (;;) {
    let read = 0
    try {
      read = readSync(fd, chunk)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return text
      throw error
    }
    if (read === 0) return text
    text += chunk.subarray(0, read).toString()
  }
}

describe('the log destination', () => {
  let dir: string | undefined
  let fds: number[] = []
  afterEach(() => {
    for (const fd of fds) {
      try {
        closeSync(fd)
      } catch {
        // Closed already: the destination closes the end it writes when it ends.
      }
    }
    if (dir) rmSync(dir, { recursive: true, force: true })
    fds = []
    dir = undefined
  })

  /**
   * A pipe that nobody reads until the test does (a FIFO, neither end blocking): the end the test
   * reads, and the end the destination is given (it opens the pipe again for itself).
   */
  function stalledPipe(): { readonly reader: number; readonly writer: number } {
    dir = mkdtempSync(join(tmpdir(), 'openbook-log-'))
    const path = join(dir, 'stdout')
    execFileSync('mkfifo', [path])
    const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
    const writer = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK)
    fds = [reader, writer]
    return { reader, writer }
  }

  const closed = (destination: LogDestination) =>
    new Promise<void>((resolve) => {
      destination.once('close', () => resolve())
      destination.end()
    })

  it('keeps at most its bound of unwritten lines beside a stalled reader, and says how many it dropped', async () => {
    const pipe = stalledPipe()
    const destination = logDestination({ fd: pipe.writer, maxLength: 16_384 })
    const log = pino({ level: 'info' }, destination)
    warnOfDroppedLines(destination, log)
    // 2,000 lines of about 150 bytes: 300 KB against the pipe's 64 KB and the bound's 16 KB.
    for (let line = 0; line < 2_000; line++) log.info({ line, route: '/api/public/v1/customers' }, 'request')
    await sleep(300)
    let text = drain(pipe.reader)
    // What the pipe held, and what the bound kept: far fewer than were logged, none cut in two.
    const written = () => text.split('\n').filter((line) => line.includes('"msg":"request"')).length
    expect(written()).toBeGreaterThan(100)
    expect(written()).toBeLessThan(1_000)
    // The reader reads again: the buffer goes out, then the one line that counts the rest.
    let warning: { droppedLines?: number } | undefined
    for (let waited = 0; !warning && waited < 50; waited++) {
      await sleep(100)
      text += drain(pipe.reader)
      const line = text.split('\n').find((each) => each.includes('log lines dropped'))
      warning = line ? (JSON.parse(line) as { droppedLines?: number }) : undefined
    }
    expect(warning?.droppedLines).toBe(2_000 - written())
    for (const line of text.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow()
    await closed(destination)
  })

  it('says nothing when no line was dropped', async () => {
    const pipe = stalledPipe()
    const destination = logDestination({ fd: pipe.writer })
    const log = pino({ level: 'info' }, destination)
    warnOfDroppedLines(destination, log)
    for (let line = 0; line < 100; line++) log.info({ line }, 'request')
    await sleep(300)
    const text = drain(pipe.reader)
    expect(text.trim().split('\n')).toHaveLength(100)
    expect(text).not.toContain('dropped')
    await closed(destination)
  })
})
