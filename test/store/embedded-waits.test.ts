import { Readable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { importNdjson } from '../../src/import/ndjson.js'
import { createTestStore, type TestStore } from '../helpers/stores.js'

// The embedded store runs one transaction at a time: an import that waits for its turn behind
// another operator's transaction says so, as it does on PostgreSQL behind a writer's lock.

describe('an import waiting for the embedded store', () => {
  let test: TestStore
  beforeAll(async () => {
    test = await createTestStore('embedded')
  })
  afterAll(async () => {
    await test?.close()
  })

  it('says within a second who holds the store and since when, then goes on', async () => {
    let release = () => {}
    const held = test.store.admin(
      () =>
        new Promise<void>((resolve) => {
          release = resolve
        }),
    )
    // The holder's transaction has begun once the store names it.
    while (test.store.holder?.() === undefined) await new Promise((r) => setTimeout(r, 10))
    const lines: string[] = []
    const started = Date.now()
    const line = JSON.stringify({ type: 'organization', id: 'org_wait', name: 'Wait', plan: 'starter' })
    const imported = importNdjson(test.store, Readable.from([`${line}\n`]), {
      onWait: (said) => lines.push(said),
    })
    while (lines.length === 0 && Date.now() - started < patience(5_000))
      await new Promise((r) => setTimeout(r, 20))
    expect(Date.now() - started).toBeLessThan(patience(1_600))
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^waiting: the store held by pid ${process.pid} \\(.*\\) since \\d{4}-\\d\\d-\\d\\dT.*; the import goes on when it ends$`,
        ),
      ),
    ])
    release()
    await held
    const summary = await imported
    expect(summary.counts).toMatchObject({ organization: 1 })
    expect(lines).toHaveLength(1)
  })
})
