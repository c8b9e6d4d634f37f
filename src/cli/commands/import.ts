import { waitForStandbys } from '../../domain/replication.js'
import { type ImportSummary, importNdjson } from '../../import/ndjson.js'
import { refreshStatistics } from '../../store/migrate.js'
import { printResult, progressBar } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

function describeImport(summary: ImportSummary): string {
  const parts = Object.entries(summary.counts).map(([type, n]) => `${type} ${n}`)
  const firstLoad = summary.firstLoad.length ? ` (first load of ${summary.firstLoad.join(', ')})` : ''
  const revoked = summary.revokedKeys.map(
    (r) =>
      `revoked ${r.keys} active API key${r.keys === 1 ? '' : 's'} of ${r.orgId}: its ${r.plan} plan has no API access\n`,
  )
  return `imported ${summary.lines} lines: ${parts.join(', ') || 'nothing'}${firstLoad}\n${revoked.join('')}`
}

export const registerImport: RegisterCommand = (program, context) => {
  program
    .command('import')
    .description('load an NDJSON file (or - for standard input): all of it, or nothing')
    .argument('<file>', 'path of the NDJSON file, or - for standard input')
    .option(...JSON_OPTION)
    .action(async (file: string, options: { json?: boolean }) => {
      const input = await context.openInput(file)
      const progress = progressBar(context, undefined, 'lines')
      try {
        const summary = await context.withStore(async (store) => {
          const imported = await importNdjson(store, input, { onProgress: (lines) => progress.update(lines) })
          await refreshStatistics(store)
          // Revoked keys, as after `keys revoke`: refused on every read replica before we return.
          if (imported.revokedKeys.length > 0) await waitForStandbys(store, 30_000)
          return imported
        })
        progress.stop()
        printResult(context, options, summary, () => context.stdout.write(describeImport(summary)))
      } finally {
        progress.stop()
      }
    })
}
