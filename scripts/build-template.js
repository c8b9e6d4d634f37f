// `npm run build`, after tsc: the template of a new embedded DATA_DIR, dist/embedded-template
// (src/store/embedded/embedded-template.ts), created and migrated here once, so that a first start copies
// it in a fraction of a second instead of running PGlite's initdb and the migrations. Kept when the
// one there is sound and of the current PGlite, settings and migrations.
import { renameSync, rmSync } from 'node:fs'
import { createEmbeddedStore } from '../dist/store/embedded/embedded.js'
import { BUILT_TEMPLATE, sealTemplate, templateFault } from '../dist/store/embedded/embedded-template.js'
import { migrate } from '../dist/store/schema/migrate.js'

const why = templateFault(BUILT_TEMPLATE)
if (why === undefined) process.exit(0)

process.stderr.write(`openbook: making the embedded DATA_DIR template (${why}): a few seconds\n`)
const making = `${BUILT_TEMPLATE}.making-${process.pid}`
rmSync(making, { recursive: true, force: true })
try {
  const store = await createEmbeddedStore(making, {
    template: false,
    shortLived: true,
    command: 'npm run build',
  })
  try {
    await migrate(store)
  } finally {
    await store.close()
  }
  sealTemplate(making)
  rmSync(BUILT_TEMPLATE, { recursive: true, force: true })
  renameSync(making, BUILT_TEMPLATE)
} finally {
  rmSync(making, { recursive: true, force: true })
}
