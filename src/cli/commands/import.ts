import { afterLoad } from '../../domain/maintenance.js'
import { waitForStandbys } from '../../domain/replication.js'
import { type ImportSummary, InputIdleError, importNdjson } from '../../import/ndjson.js'
import { count } from '../options.js'
import { afterCommit, writing } from '../outcome.js'
import { printResult, progressBar } from '../output.js'
import { JSON_OPTION, type RegisterCommand } from './command.js'

/** How long `import` waits for more input before it rolls back (--idle-timeout). */
const DEFAULT_IDLE_SECONDS = 30

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
    .option(
      '--idle-timeout <seconds>',
      'roll back when the input sends nothing for this long (0: wait for ever)',
      count('--idle-timeout'),
      DEFAULT_IDLE_SECONDS,
    )
    .option(...JSON_OPTION)
    .action(async (file: string, options: { json?: boolean; idleTimeout: number }) => {
      const input = await context.openInput(file)
      const progress = progressBar(context, undefined, 'lines')
      try {
        const again =
          file === '-'
            ? 'importing the same input again is safe: it writes only what is missing'
            : `\`openbook import ${file}\` again is safe: it writes only what is missing`
        const summary = await context.withStore(async (store) => {
          const imported = await writing({ what: 'the import', check: again }, () =>
            importNdjson(store, input, {
              onProgress: (lines) => progress.update(lines),
              idleMs: options.idleTimeout * 1000,
              onWait: (line) => context.stderr.write(`openbook: ${line}\n`),
            }),
          )
          await afterCommit(`imported ${imported.lines} lines`, again, async () => {
            await afterLoad(store)
            // Revoked keys, as after `keys revoke`: refused on every read replica before we return.
            if (imported.revokedKeys.length > 0) await waitForStandbys(store, 30_000)
          })
          return imported
        })
        progress.stop()
        printResult(context, options, summary, () => context.stdout.write(describeImport(summary)))
      } catch (error) {
        // Input left open by its producer would keep this process (or the client) waiting on it.
        if (error instanceof InputIdleError) input.destroy()
        throw error
      } finally {
        progress.stop()
      }
    })
}
