// `node --import ./bench/cpu-report.mjs …`: at exit, appends the process's own CPU time (user +
// system, in seconds) to the file CPU_REPORT_FILE names (bench/sync.ts reads it per reader).
import { appendFileSync } from 'node:fs'

const file = process.env.CPU_REPORT_FILE
if (file) {
  process.on('exit', () => {
    const { user, system } = process.cpuUsage()
    appendFileSync(file, `${(user + system) / 1e6}\n`)
  })
}
