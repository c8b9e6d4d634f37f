import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { afterEach, expect, it } from 'vitest'
import { syntheticLines } from '../../bench/synthetic-lines.js'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { FIRST_LOAD_MIN_ROWS } from '../../src/import/loader.js'
import { importNdjson } from '../../src/import/ndjson.js'
import type { Store } from '../../src/store/types.js'
import { createTestStore, describeEachStoreKind, type TestStore } from '../helpers/stores.js'
import { type Line, ndjson, organizationLines } from './fixtures.js'

/** The bulk loader's behaviour, called directly on both stores (the CLI tests run the binary). */

const input = (text: string) => Readable.from([text])

/** Every secondary index and foreign key of the tenant tables, as the catalog defines them. */
async function catalog(store: Store): Promise<string[]> {
  return store.admin(async (sql) => {
    const rows = await sql.query<{ definition: string }>(
      `SELECT pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i
        WHERE i.indrelid IN ('customers'::regclass, 'appointments'::regclass)
       UNION ALL
       SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated
         FROM pg_constraint WHERE conrelid IN ('customers'::regclass, 'appointments'::regclass)
       ORDER BY 1`,
    )
    return rows.map((row) => row.definition)
  })
}

/** A digest of every stored customer and appointment, independent of physical order. */
async function contents(store: Store): Promise<{ customers: number; appointments: number; digest: string }> {
  return store.admin(async (sql) => {
    const [row] = await sql.query<{ customers: number; appointments: number; digest: string }>(
      `SELECT (SELECT count(*)::int FROM customers) AS customers,
              (SELECT count(*)::int FROM appointments) AS appointments,
              md5((SELECT string_agg(c::text, '|' ORDER BY c.org_id, c.id) FROM customers c) ||
                  (SELECT string_agg(a::text, '|' ORDER BY a.org_id, a.id) FROM appointments a)) AS digest`,
    )
    if (!row) throw new Error('no contents')
    return row
  })
}

async function failure(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
  } catch (error) {
    return (error as Error).message
  }
  throw new Error('expected the import to fail')
}

describeEachStoreKind('bulk import on %s', (kind) => {
  const opened: TestStore[] = []
  const open = async () => {
    const testStore = await createTestStore(kind)
    opened.push(testStore)
    return testStore.store
  }
  afterEach(async () => {
    for (const testStore of opened.splice(0)) await testStore.close()
  })

  it(
    'a first load (large first chunk, empty tables) equals a load in small chunks, keeps every index and foreign key, and lets the last line of a key win across chunks',
    async () => {
      const lines = [...syntheticLines(FIRST_LOAD_MIN_ROWS + 2_000, 4)].map((l) => l.line)
      // The same customers again after the first chunk, renamed: the later line must win.
      const renamed = lines
        .filter((line) => line.includes('"type":"customer"'))
        .slice(0, 50)
        .map((line) => line.replace(/"firstName":"[^"]*"/, '"firstName":"Renamed"'))
      const text = `${[...lines, ...renamed].join('\n')}\n`

      const bulk = await open()
      const before = await catalog(bulk)
      const summary = await importNdjson(bulk, input(text), { chunkLines: lines.length })
      expect(summary.lines).toBe(lines.length + renamed.length)
      // Only where no reader runs beside the load: on PostgreSQL other organizations go on reading.
      expect(summary.firstLoad).toEqual(kind === 'embedded' ? ['customers', 'appointments'] : [])
      expect(await catalog(bulk)).toEqual(before)

      const small = await open()
      expect((await importNdjson(small, input(text), { chunkLines: 1_000 })).firstLoad).toEqual([])
      const [a, b] = [await contents(bulk), await contents(small)]
      expect(a).toEqual(b)
      expect(a.customers).toBeGreaterThan(FIRST_LOAD_MIN_ROWS / 4)

      const renamedCount = await bulk.admin(
        async (sql) =>
          (
            await sql.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM customers WHERE first_name = 'Renamed'",
            )
          )[0]?.n,
      )
      expect(renamedCount).toBe(renamed.length)
    },
    patience(180_000),
  )

  it(
    'a bad line after a first load began leaves nothing behind, and the catalog as it was',
    async () => {
      const lines = [...syntheticLines(FIRST_LOAD_MIN_ROWS + 1_000, 6)].map((l) => l.line)
      const store = await open()
      const before = await catalog(store)
      const bad = '{"type":"staff","orgId":"org_nowhere","id":"stf_x"}'
      const message = await failure(
        importNdjson(store, input(`${[...lines, bad].join('\n')}\n`), { chunkLines: lines.length }),
      )
      expect(message).toBe(
        `line ${lines.length + 1}: staff.orgId: refers to an organization that does not exist (earlier in the file or already stored)`,
      )
      expect(await catalog(store)).toEqual(before)
      expect(await contents(store)).toMatchObject({ customers: 0, appointments: 0 })
    },
    patience(180_000),
  )

  it('keys of an organization that the file leaves on a plan without API access are revoked in its transaction; a later line that restores access keeps them', async () => {
    const store = await open()
    await importNdjson(
      store,
      input(
        ndjson([...organizationLines('org_kd', 'o@kd.test'), ...organizationLines('org_ku', 'o@ku.test')]),
      ),
    )
    const keyIds: string[] = []
    for (const orgId of ['org_kd', 'org_ku']) {
      for (const n of [1, 2]) {
        const id = `key_${orgId}_${n}`
        keyIds.push(id)
        await store.admin((sql) =>
          sql.query(
            `INSERT INTO api_keys (org_id, id, env, key_hash, hint) VALUES ($1, $2, 'test', $3, 'svc_test_…0000')`,
            [orgId, id, createHash('sha256').update(id).digest('hex')],
          ),
        )
      }
    }
    const plan = (orgId: string, p: string) => ({ type: 'organization', id: orgId, name: orgId, plan: p })
    // org_kd ends on free; org_ku goes to starter and back to professional in a later chunk.
    const lines = [
      plan('org_kd', 'starter'),
      plan('org_ku', 'starter'),
      plan('org_kd', 'free'),
      plan('org_ku', 'professional'),
    ]
    const summary = await importNdjson(store, input(ndjson(lines)), { chunkLines: 2 })
    expect(summary.revokedKeys).toEqual([{ orgId: 'org_kd', plan: 'free', keys: 2 }])
    const statuses = await store.admin((sql) =>
      sql.query<{ id: string; revoked: boolean }>(
        'SELECT id, revoked_at IS NOT NULL AS revoked FROM api_keys ORDER BY id',
      ),
    )
    expect(statuses).toEqual(keyIds.sort().map((id) => ({ id, revoked: id.startsWith('key_org_kd') })))

    // A failed import revokes nothing: the same transaction.
    await store.admin((sql) =>
      sql.query("UPDATE organizations SET plan = 'professional' WHERE id = 'org_kd'"),
    )
    await store.admin((sql) => sql.query("UPDATE api_keys SET revoked_at = NULL WHERE org_id = 'org_kd'"))
    const message = await failure(
      importNdjson(store, input(ndjson([plan('org_kd', 'starter'), { type: 'user' }]))),
    )
    expect(message).toMatch(/^line 2: user\.id/)
    const active = await store.admin((sql) =>
      sql.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM api_keys WHERE org_id = 'org_kd' AND revoked_at IS NULL",
      ),
    )
    expect(active[0]?.n).toBe(2)
  })

  it('a reference to a record further down the file is refused, naming the line and field', async () => {
    const org = organizationLines('org_fwd', 'o@fwd.test')
    // The first appointment moved above its customer.
    const appointment = org[8] as Line
    const reordered = [...org.slice(0, 5), appointment, ...org.slice(5, 8)]
    const message = await failure(importNdjson(await open(), input(ndjson(reordered))))
    expect(message).toMatch(/^line 6: appointment\.customerId: refers to a customer/)
  })

  it('a key repeated in the same chunk counts from its first line: a reference between the two is valid', async () => {
    const org = organizationLines('org_rep', 'o@rep.test')
    const customer = org[5] as Line
    const lines = [...org, { ...customer, firstName: 'Later' }]
    const store = await open()
    await importNdjson(store, input(ndjson(lines)))
    const names = await store.admin((sql) =>
      sql.query<{ first_name: string }>('SELECT first_name FROM customers WHERE id = $1', [customer.id]),
    )
    expect(names).toEqual([{ first_name: 'Later' }])
  })

  it('a value the database refuses names its line and field (a date that does not exist)', async () => {
    const org = organizationLines('org_date', 'o@date.test')
    const lines = [...org.slice(0, 5), { ...(org[5] as Line), dateOfBirth: '1990-02-30' }]
    const message = await failure(importNdjson(await open(), input(ndjson(lines))))
    expect(message).toMatch(/^line 6: customer\.dateOfBirth: .*1990-02-30/)
  })

  it.each([
    ['no date-time', 'start', 'soon', ''],
    ['infinity', 'start', 'infinity', ''],
    ['a year the API cannot write', 'end', '9999-12-31T23:59:59.500-15:00', 'must be from 0001-01-01'],
  ])("an appointment's %s names its line and field", async (_case, field, value, message) => {
    const org = organizationLines('org_times', 'o@times.test')
    const at = org.findIndex((line) => line.type === 'appointment')
    const lines = [...org.slice(0, at), { ...(org[at] as Line), [field]: value }]
    const expected = `line ${at + 1}: appointment.${field}: ${message}`
    expect((await failure(importNdjson(await open(), input(ndjson(lines))))).startsWith(expected)).toBe(true)
  })

  it('importing the same file again writes nothing; a changed record rewrites only its own row', async () => {
    const store = await open()
    const lines = organizationLines('org_again', 'o@again.test')
    await importNdjson(store, input(ndjson(lines)))
    // xmin is the transaction that wrote a row version: unchanged means not rewritten.
    const versions = () =>
      store.admin((sql) =>
        sql.query<{ id: string; version: string }>(
          `SELECT id, xmin::text AS version FROM customers UNION ALL
             SELECT id, xmin::text FROM appointments UNION ALL SELECT id, xmin::text FROM users
             ORDER BY 1`,
        ),
      )
    const first = await versions()
    await importNdjson(store, input(ndjson(lines)))
    expect(await versions()).toEqual(first)

    const changed = lines.map((line) =>
      line.id === 'cus_org_again_2' ? { ...line, firstName: 'Changed' } : line,
    )
    await importNdjson(store, input(ndjson(changed)))
    const after = await versions()
    const rewritten = after.filter((row, i) => row.version !== first[i]?.version).map((row) => row.id)
    expect(rewritten).toEqual(['cus_org_again_2'])
  })

  it('a reference to nothing says what is missing, in plain words', async () => {
    const store = await open()
    const org = organizationLines('org_ref', 'o@ref.test')
    const cases: [Line[], string][] = [
      [
        [...org.slice(0, 2), { ...(org[2] as Line), userId: 'usr_nobody' }],
        'line 3: membership.userId: refers to a user that does not exist (earlier in the file or already stored)',
      ],
      [
        [org[0] as Line, { ...(org[3] as Line), orgId: 'org_nowhere' }],
        'line 2: staff.orgId: refers to an organization that does not exist (earlier in the file or already stored)',
      ],
      [
        [...org.slice(0, 5), { ...(org[5] as Line), preferredStaffId: 'stf_elsewhere' }],
        'line 6: customer.preferredStaffId: refers to a staff member that is not in this organization (earlier in the file or already stored)',
      ],
    ]
    for (const [lines, message] of cases)
      expect(await failure(importNdjson(store, input(ndjson(lines))))).toBe(message)
  })

  it('a line over 1 MiB is refused by its number, read no further than the limit', async () => {
    const store = await open()
    const org = organizationLines('org_long', 'o@long.test')
    const head = Buffer.from(ndjson(org.slice(0, 2)))
    let pulled = 0
    // 16 MiB without a newline, made as it is read: only what the import pulls exists at all.
    async function* endless() {
      yield head
      yield Buffer.from('{"type":"user","id":"usr_long","email":"l@long.test","name":"')
      const piece = Buffer.alloc(64 * 1024, 'x')
      for (let i = 0; i < 256; i++) {
        pulled += piece.length
        yield piece
      }
    }
    const message = await failure(importNdjson(store, Readable.from(endless(), { objectMode: false })))
    expect(message).toBe('line 3: line too long (over 1 MiB)')
    expect(pulled).toBeLessThan(4 * 1024 * 1024)
    const [stored] = await store.admin((sql) =>
      sql.query<{ n: number }>("SELECT count(*)::int AS n FROM organizations WHERE id = 'org_long'"),
    )
    expect(stored?.n).toBe(0)
  })

  it('a line of exactly 1 MiB is read (CRLF or not), one byte more is refused', async () => {
    const store = await open()
    const line = '{"type":"organization","id":"org_mib","name":"MiB","plan":"free"}'
    // JSON allows trailing white space: a valid line of any length.
    const exactly = line.padEnd(1_048_576, ' ')
    expect(Buffer.byteLength(exactly)).toBe(1_048_576)
    const summary = await importNdjson(
      store,
      input(`${exactly}
${exactly}
${exactly}`),
    )
    expect(summary.lines).toBe(3)
    expect(
      await failure(
        importNdjson(
          store,
          input(`${line}
${exactly} 
`),
        ),
      ),
    ).toBe('line 2: line too long (over 1 MiB)')
  })

  it('bytes that are not UTF-8 are refused, naming the line and field; a BOM may open the file only', async () => {
    const store = await open()
    const org = Buffer.from(ndjson(organizationLines('org_utf', 'o@utf.test').slice(0, 1)))
    const user = (name: Buffer) =>
      Buffer.concat([
        Buffer.from('{"type":"user","id":"usr_utf","email":"u@utf.test","name":"'),
        name,
        Buffer.from('"}\n'),
      ])
    const bytes = (...parts: Buffer[]) => Readable.from([Buffer.concat(parts)])
    expect(await failure(importNdjson(store, bytes(org, user(Buffer.from([0x41, 0xff, 0x42])))))).toBe(
      'line 2: user.name: not valid UTF-8',
    )
    // A lone continuation byte, an overlong encoding, a surrogate: each is invalid.
    for (const bad of [[0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80]]) {
      expect(await failure(importNdjson(store, bytes(org, user(Buffer.from(bad)))))).toBe(
        'line 2: user.name: not valid UTF-8',
      )
    }
    expect(await failure(importNdjson(store, bytes(org, Buffer.from([0x7b, 0xfe, 0x7d, 0x0a]))))).toMatch(
      /^line 2: not valid UTF-8/,
    )
    // A BOM opens the file: skipped. Anywhere else it is not JSON.
    const bom = Buffer.from([0xef, 0xbb, 0xbf])
    expect((await importNdjson(store, bytes(bom, org))).counts).toEqual({ organization: 1 })
    expect(await failure(importNdjson(store, bytes(org, bom, org)))).toBe('line 2: not valid JSON')
    // A character split between two chunks of the stream is still one character.
    const name = Buffer.from('Zoë Æther 🙂')
    const whole = Buffer.concat([org, user(name)])
    const split = [...whole].map((byte) => Buffer.from([byte]))
    await importNdjson(store, Readable.from(split))
    const [stored] = await store.admin((sql) =>
      sql.query<{ name: string }>("SELECT name FROM users WHERE id = 'usr_utf'"),
    )
    expect(stored?.name).toBe('Zoë Æther 🙂')
  })

  it('a NUL character, which PostgreSQL text cannot hold, is refused naming its field', async () => {
    const store = await open()
    const org = organizationLines('org_nul', 'o@nul.test')
    const lines = [...org.slice(0, 3), { ...(org[3] as Line), name: 'Ma\u0000ra' }]
    expect(await failure(importNdjson(store, input(ndjson(lines))))).toBe(
      'line 4: staff.name: must not contain NUL (\\u0000)',
    )
  })

  it('dayKey is derived from start when absent, and refused when it is not the UTC day of start', async () => {
    const store = await open()
    const org = organizationLines('org_day', 'o@day.test')
    const appointment = org[8] as Line
    // 23:30 at UTC-5 is the next day in UTC.
    const late = { ...appointment, start: '2025-02-01T23:30:00-05:00', end: '2025-02-02T00:30:00-05:00' }
    expect(
      await failure(
        importNdjson(store, input(ndjson([...org.slice(0, 8), { ...late, dayKey: '2025-02-01' }]))),
      ),
    ).toBe('line 9: appointment.dayKey: must be the UTC day of start (2025-02-02)')
    await importNdjson(
      store,
      input(ndjson([...org.slice(0, 8), late, { ...(org[9] as Line), dayKey: '2025-01-12' }])),
    )
    const days = await store.admin((sql) =>
      sql.query<{ id: string; day_key: string }>('SELECT id, day_key FROM appointments ORDER BY id'),
    )
    expect(days).toEqual([
      { id: 'apt_org_day_1', day_key: '2025-02-02' },
      { id: 'apt_org_day_2', day_key: '2025-01-12' },
    ])
  })

  it('an organization line without createdAt keeps the stored one: the same file again writes nothing', async () => {
    const store = await open()
    const lines: Line[] = [{ type: 'organization', id: 'org_keep', name: 'Keep', plan: 'free' }]
    const stored = () =>
      store.admin((sql) =>
        sql.query<{ name: string; created_at: string; version: string }>(
          "SELECT name, created_at::text, xmin::text AS version FROM organizations WHERE id = 'org_keep'",
        ),
      )
    await importNdjson(store, input(ndjson(lines)))
    const [first] = await stored()
    await importNdjson(store, input(ndjson(lines)))
    expect(await stored()).toEqual([first])
    await importNdjson(store, input(ndjson([{ ...(lines[0] as Line), name: 'Renamed' }])))
    const [renamed] = await stored()
    expect(renamed).toMatchObject({ name: 'Renamed', created_at: first?.created_at })
    expect(renamed?.version).not.toBe(first?.version)
    // A createdAt given is a createdAt stored.
    await importNdjson(store, input(ndjson([{ ...(lines[0] as Line), createdAt: '2020-01-01T00:00:00Z' }])))
    expect((await stored())[0]?.created_at).toMatch(/^2020-01-01 00:00:00/)
    // A later line of the same file without it keeps it too, in one chunk or across two.
    for (const chunkLines of [10, 1]) {
      const twice = [{ ...(lines[0] as Line), createdAt: '2021-01-01T00:00:00Z' }, lines[0] as Line]
      await importNdjson(store, input(ndjson(twice)), { chunkLines })
      expect((await stored())[0]?.created_at).toMatch(/^2021-01-01 00:00:00/)
      await importNdjson(store, input(ndjson([{ ...(lines[0] as Line), createdAt: '2020-01-01T00:00:00Z' }])))
    }
  })

  it("a user with another user's e-mail is refused, naming the line and field", async () => {
    const store = await open()
    await importNdjson(store, input(ndjson(organizationLines('org_mail', 'taken@mail.test'))))
    const message = await failure(
      importNdjson(store, input(ndjson([{ type: 'user', id: 'usr_other', email: 'TAKEN@mail.test' }]))),
    )
    expect(message).toBe('line 1: user.email: is the e-mail of another user')
  })
})
