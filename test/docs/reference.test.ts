// The reference page (`npm run docs`, docs/api.html) opened in a real headless Chromium: it must
// render both operations, their parameters and the error shapes, and make no request outside
// file:// (a CDN script or a web font would). Debian's chromium is required under CI.
import { existsSync, mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { type Browser, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { writeReference } from '../../scripts/build-docs.js'
import { APPOINTMENT_LIST } from '../../src/schemas/filters.js'

const CHROMIUM = '/usr/bin/chromium'
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const SCREENSHOT = resolve(ROOT, 'docs/api.png') // kept out of git (.gitignore)
const available = existsSync(CHROMIUM)

if (!available && !process.env.CI) {
  console.warn(
    `\n!!! test/docs/reference.test.ts SKIPPED: ${CHROMIUM} is missing (apt-get install -y chromium). ` +
      'Under CI (CI set) this test fails instead.\n',
  )
}

describe.skipIf(!available && !process.env.CI)('reference page (docs/api.html)', () => {
  let browser: Browser | undefined

  beforeAll(async () => {
    if (!available)
      throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    })
  })

  afterAll(async () => {
    await browser?.close()
  })

  it(
    'renders operations, parameters, errors and client examples with no request off file://',
    async () => {
      if (!browser) throw new Error('no browser')
      const file = writeReference()
      const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } })
      const outside: string[] = []
      const problems: string[] = []
      // Local schemes only: the page itself (file:), Redoc's search worker (blob:) and inline data:.
      const local = (url: string) => /^(file|data|blob|about):/.test(url)
      await context.route('**/*', (route) => {
        const url = route.request().url()
        if (local(url)) return route.continue()
        outside.push(url)
        return route.abort('blockedbyclient')
      })
      context.on('request', (request) => {
        if (!local(request.url()) && !outside.includes(request.url())) outside.push(request.url())
      })
      const page = await context.newPage()
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`))
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console: ${message.text()}`)
      })
      try {
        await page.goto(pathToFileURL(file).href, { waitUntil: 'load' })
        await page.waitForSelector('[data-section-id^="operation/"]', { timeout: 20_000 })
        await page.waitForLoadState('networkidle')

        const html = await page.content()
        const parameters: Record<string, string[]> = {
          listCustomers: ['limit', 'offset'],
          // Each described filter, as the reference page shows the document.
          listAppointments: ['limit', 'offset', ...APPOINTMENT_LIST.filters.map((filter) => filter.param)],
        }
        for (const [operationId, names] of Object.entries(parameters)) {
          const section = page.locator(`[data-section-id="operation/${operationId}"]`)
          // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText is the text shown, which is the point
          const lines = (await section.innerText()).split('\n').map((line) => line.trim())
          for (const name of names) expect(lines, `${operationId}: parameter ${name}`).toContain(name)
          // 400, 401 and 500 are expanded, each showing the Error schema's fields.
          for (const status of ['400', '401', '500']) {
            const at = lines.findIndex((line) => line.startsWith(status))
            expect(at, `${operationId}: response ${status}`).toBeGreaterThan(-1)
            // After the response's headers (X-Request-Id, …), its schema.
            expect(lines.slice(at + 1, at + 40), `${operationId}: ${status} shows the Error schema`).toEqual(
              expect.arrayContaining(['error', 'message', 'code']),
            )
          }
        }
        // The rules a client needs are on the page: the headers, every error code
        // and the guidance on concurrency, idempotency and backoff.
        // biome-ignore lint/performance/useDomNodeTextContent: the text shown, as above
        const text = await page.locator('body').innerText()
        for (const rule of [
          'X-Request-Id',
          'Retry-After',
          'Openbook-Key-Expires',
          'expired_api_key',
          'revoked_api_key',
          'service_unavailable',
          'two requests in flight per key',
          'Idempotency',
          'backoff',
        ])
          expect(text, rule).toContain(rule)
        // Client examples use @openbook/client.
        expect(html).toContain('new Openbook')
        expect(html).toContain('customers.list({ limit: 25 })')

        mkdirSync(dirname(SCREENSHOT), { recursive: true })
        await page.screenshot({ path: SCREENSHOT, fullPage: false })
      } finally {
        await context.close()
      }
      expect(outside, 'requests outside file://').toEqual([])
      expect(problems).toEqual([])
    },
    patience(60_000),
  )
})
