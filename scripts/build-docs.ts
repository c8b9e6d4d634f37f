// `npm run docs`: writes docs/api.html, a self-contained API reference built with Redoc from the
// OpenAPI document the server serves. Redoc's standalone bundle and the document are inlined, so
// opening the file makes no request at all (no CDN script, no web font). The page is not served on
// the public port: the contract's surface stays the API and /openapi.json. It also writes the
// table of docs/integrators/errors.md from the error catalogue, which a test holds it to, and the
// schema as the migrations leave it (src/store/schema/current.sql, from a PostgreSQL database it
// migrates: TEST_DATABASE_URL, or the tests' default).
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ERROR_CATALOGUE } from '../src/errors.js'
import { buildOpenApiDocument } from '../src/openapi/document.js'
import { LIST_ROUTES, PUBLIC_V1_PREFIX } from '../src/routes/public/v1/index.js'
import { writeCurrentSchema } from './schema-dump.js'

export const REFERENCE_PATH = resolve(dirname(fileURLToPath(import.meta.url)), '../docs/api.html')
export const ERRORS_PAGE_PATH = resolve(
  dirname(fileURLToPath(import.meta.url)),
  '../docs/integrators/errors.md',
)

const BASE_URL = 'https://api.example.com'

/**
 * Examples with `@openbook/client`, per operationId (Redoc shows them as `x-codeSamples`). The
 * client's tests compile them under `strict` and `exactOptionalPropertyTypes`.
 */
export const CLIENT_SAMPLES: Record<string, string> = {
  listCustomers: `import { Openbook } from '@openbook/client'

const openbook = new Openbook({ apiKey: process.env.OPENBOOK_KEY ?? '', baseUrl: '${BASE_URL}' })

// One page
const page = await openbook.customers.list({ limit: 25 })
console.log(page.data, page.pagination.hasMore)

// Every customer, page after page, none missed
for await (const customer of openbook.customers.all()) console.log(customer.id)`,
  listAppointments: `import { Openbook } from '@openbook/client'

const openbook = new Openbook({ apiKey: process.env.OPENBOOK_KEY ?? '', baseUrl: '${BASE_URL}' })

// One page of a window
const page = await openbook.appointments.list({
  limit: 25,
  status: 'confirmed',
  startDate: '2026-01-01T00:00:00Z',
  endDate: '2026-02-01T00:00:00Z',
})
console.log(page.data, page.pagination.hasMore)

// Every appointment of the window, none missed
for await (const appointment of openbook.appointments.all({ startDate: '2026-01-01T00:00:00Z' })) {
  console.log(appointment.id)
}`,
}

/** A small grey mark in place of Redoc's CDN logo. */
const OFFLINE_LOGO = `data:image/svg+xml,${encodeURIComponent(
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><circle cx="8" cy="8" r="6" fill="#8d8d8d"/></svg>',
)}`

type Operation = { operationId?: string; [key: string]: unknown }

/** A copy of the served document with client examples added; the served document is unchanged. */
export function referenceDocument(): Record<string, unknown> {
  const doc = structuredClone(buildOpenApiDocument(PUBLIC_V1_PREFIX, LIST_ROUTES)) as {
    paths: Record<string, Record<string, Operation>>
    [key: string]: unknown
  }
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const operation of Object.values(item)) {
      const sample = operation.operationId ? CLIENT_SAMPLES[operation.operationId] : undefined
      if (sample === undefined) continue
      operation['x-codeSamples'] = [
        { lang: 'JavaScript', label: '@openbook/client', source: sample },
        {
          lang: 'Shell',
          label: 'curl',
          source: `curl -H "Authorization: Bearer $OPENBOOK_KEY" '${BASE_URL}${path}?limit=25'`,
        },
      ]
    }
  }
  return doc
}

/** Text safe inside a <script> element: no `</script`, no `<!--`. */
function scriptSafe(text: string): string {
  return text.replace(/<\/script/gi, '<\\/script').replace(/<!--/g, '<\\!--')
}

/** The whole page: Redoc's standalone bundle and the document inlined, nothing fetched. */
export function buildReferenceHtml(): string {
  const require = createRequire(import.meta.url)
  const bundle = readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'), 'utf8')
    // The source map is not shipped; without this line devtools would ask for it.
    .replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n')
  // Redoc's sidebar footer loads its logo from cdn.redoc.ly; an inline image keeps the page offline.
  const logo = 'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"'
  if (!bundle.includes(logo)) throw new Error('docs: Redoc no longer loads its logo from the CDN as expected')
  const offlineBundle = bundle.replace(logo, `src:${JSON.stringify(OFFLINE_LOGO)}`)
  const doc = referenceDocument()
  const info = doc.info as { title: string; version: string }
  // JSON with `<` escaped is valid JavaScript and cannot close the script element.
  const spec = JSON.stringify(doc).replace(/</g, '\\u003c')
  const options = JSON.stringify({
    hideDownloadButton: false,
    expandResponses: '400,401,500',
    jsonSampleExpandLevel: 3,
    theme: {
      typography: {
        fontFamily: 'system-ui, -apple-system, "Segoe UI", sans-serif',
        headings: { fontFamily: 'system-ui, -apple-system, "Segoe UI", sans-serif' },
        code: { fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace' },
      },
    },
  })
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval' blob:; worker-src blob:; style-src 'unsafe-inline'; img-src data: blob:; font-src data:">
<title>${info.title} ${info.version} reference</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<div id="redoc-container"></div>
<script>${scriptSafe(offlineBundle)}</script>
<script>
Redoc.init(${spec}, ${options}, document.getElementById('redoc-container'))
</script>
</body>
</html>
`
}

export function writeReference(path: string = REFERENCE_PATH): string {
  writeFileSync(path, buildReferenceHtml())
  return path
}

/** The lines that enclose the generated table in the errors page. */
export const ERROR_TABLE_START =
  '<!-- The table is written by `npm run docs` from the error catalogue, src/errors.ts: edit it there. -->'
export const ERROR_TABLE_END = '<!-- End of the written table. -->'

/** The catalogue as a Markdown table, its columns padded to one width each. */
export function errorTable(): string {
  const rows = Object.entries(ERROR_CATALOGUE).map(([code, { status, title, meaning }]) => [
    `\`${code}\``,
    String(status),
    title,
    meaning,
  ])
  const header = ['`code`', 'Status', '`error`', 'Meaning']
  const widths = header.map((name, i) => Math.max(name.length, ...rows.map((row) => row[i]?.length ?? 0)))
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => (i === 1 ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join(' | ')} |`
  const rule = `| ${widths.map((width, i) => (i === 1 ? `${'-'.repeat(width - 1)}:` : '-'.repeat(width))).join(' | ')} |`
  return [line(header), rule, ...rows.map(line)].join('\n')
}

/** The errors page with its table as the catalogue renders it; the rest of the page as it is. */
export function errorsPage(page: string): string {
  const start = page.indexOf(ERROR_TABLE_START)
  const end = page.indexOf(ERROR_TABLE_END)
  if (start < 0 || end < start) throw new Error('docs: the errors page lost the lines around its table')
  return `${page.slice(0, start + ERROR_TABLE_START.length)}\n\n${errorTable()}\n\n${page.slice(end)}`
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(`docs: wrote ${writeReference()}`)
  writeFileSync(ERRORS_PAGE_PATH, errorsPage(readFileSync(ERRORS_PAGE_PATH, 'utf8')))
  console.log(`docs: wrote ${ERRORS_PAGE_PATH}`)
  const adminUrl = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'
  try {
    console.log(`docs: wrote ${await writeCurrentSchema(adminUrl)}`)
  } catch (error) {
    console.error(`docs: the schema was not written (PostgreSQL at ${adminUrl}): ${(error as Error).message}`)
    process.exitCode = 1
  }
}
