// The errors page's table is the error catalogue's (src/errors.ts), as `npm run docs` writes it.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ERRORS_PAGE_PATH, errorsPage } from '../../scripts/build-docs.js'
import { ERROR_CATALOGUE } from '../../src/errors.js'

describe('docs/integrators/errors.md', () => {
  const page = readFileSync(ERRORS_PAGE_PATH, 'utf8')

  it('holds the table the catalogue renders (when this fails: npm run docs, and commit the page)', () => {
    expect(page).toBe(errorsPage(page))
  })

  it('names every code of the catalogue', () => {
    for (const code of Object.keys(ERROR_CATALOGUE)) expect(page).toContain(`| \`${code}\``)
  })
})
