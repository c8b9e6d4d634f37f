import { describe, expect, it } from 'vitest'
import { replaceBetween } from '../report.js'

describe('replaceBetween', () => {
  const start = '<!-- bench:start -->'
  const end = '<!-- bench:end -->'

  it('replaces what is between the markers and keeps the rest', () => {
    const text = `# Title\n\n${start}\nold\n${end}\n\nNotes kept.\n`
    expect(replaceBetween(text, start, end, '\nnew table\n')).toBe(
      `# Title\n\n${start}\nnew table\n${end}\n\nNotes kept.\n`,
    )
  })

  it('appends the markers and the text when there are none', () => {
    expect(replaceBetween('# Title\n\n', start, end, 'new')).toBe(`# Title\n\n${start}\nnew\n${end}\n`)
  })
})
