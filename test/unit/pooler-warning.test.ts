import { describe, expect, it, vi } from 'vitest'
import type { PoolOptions } from '../../src/store/postgres/pool.js'

const opened: PoolOptions[] = []

// The pools are not opened: the test sees what each is given, and what it would report.
vi.mock('../../src/store/postgres/pool.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/store/postgres/pool.js')>()
  return {
    ...original,
    openDatabase: (_url: string, options: PoolOptions) => {
      opened.push(options)
      return {
        pool: { end: async () => undefined, totalCount: 0, idleCount: 0, waitingCount: 0 },
        transaction: async () => [],
      }
    },
  }
})

describe('the "switched to pooler" warning', () => {
  it('is said once a process, however many pools (primary, replica, probe) meet the pooler', async () => {
    const { createPostgresStore } = await import('../../src/store/postgres/postgres.js')
    const detected = vi.fn()
    const store = createPostgresStore({
      connectionString: 'postgres://primary/db',
      readConnectionString: 'postgres://replica/db',
      onPoolerDetected: detected,
    })
    expect(opened.length).toBeGreaterThanOrEqual(2)
    for (const options of opened) options.onPoolerDetected?.('prepared statement "ob_1" does not exist')
    expect(detected).toHaveBeenCalledTimes(1)
    await store.close()
  })
})
