// The topology test's last line of defence (test/topology/run-dir.ts): started detached with the
// run's directory and the test process's pid, it waits for that process to end. If the directory is
// still there then (the test was killed before its own clean-up), it kills every process whose
// environment carries the run's marker and removes the directory.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

const [dir, ownerText] = process.argv.slice(2)
const owner = Number(ownerText)
const needle = `OPENBOOK_TOPOLOGY_RUN=${dir}\0`

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error.code === 'EPERM'
  }
}

function marked() {
  const pids = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').includes(needle)) pids.push(Number(entry))
    } catch {
      // gone, or not ours to read
    }
  }
  return pids
}

if (dir && owner > 0) {
  while (alive(owner) && existsSync(dir)) await sleep(500)
  if (existsSync(dir)) {
    for (let round = 0; round < 20; round++) {
      const pids = marked()
      if (pids.length === 0) break
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // already gone
        }
      }
      await sleep(100)
    }
    rmSync(dir, { recursive: true, force: true })
  }
}
