import { describe, expect, it } from 'vitest'
import { loggable } from '../../src/loggable-error.js'

describe('an error as a log line may carry it', () => {
  it('keeps kind, code and redacted text; drops what node-postgres hangs on the error', () => {
    // As node-postgres raises it when the server ends an idle connection: the client rides along,
    // with its connection parameters and every prepared statement's text.
    const error = Object.assign(new Error('value "ada@example.com" violates check \'x\''), {
      code: '57P01',
      routine: 'ProcessInterrupts',
      detail: 'Key (email)=(ada@example.com)',
      client: { user: 'openbook_api', connection: { parsedStatements: { s1: 'SELECT * FROM customers' } } },
    })
    const line = loggable(error)
    expect(Object.keys(line).sort()).toEqual(['code', 'message', 'routine', 'stack', 'type'])
    const text = JSON.stringify(line)
    expect(text).not.toContain('ada@example.com')
    expect(text).not.toContain('SELECT')
    expect(text).not.toContain('openbook_api')
    expect(line).toMatchObject({ type: 'Error', code: '57P01', message: 'value "…" violates check "…"' })
  })

  it('says only the kind of a thrown value that is not an object', () => {
    expect(loggable('secret text')).toEqual({ type: 'string' })
  })
})
