// Preloaded with `--import` (bench/node-cost.ts --profile): a V8 CPU profile of the whole process,
// written to $CPU_PROFILE_FILE when it is told to stop (SIGTERM), before the server's own shutdown.
// `--cpu-prof` itself is not allowed in NODE_OPTIONS.
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'

const session = new Session()
session.connect()
session.post('Profiler.enable')
session.post('Profiler.start')
process.once('SIGTERM', () => {
  // A session in the process's own thread answers at once.
  session.post('Profiler.stop', (error, result) => {
    if (!error)
      writeFileSync(process.env.CPU_PROFILE_FILE ?? 'cpu.cpuprofile', JSON.stringify(result.profile))
  })
})
