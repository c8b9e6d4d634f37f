import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  knownVersions,
  listEtag,
  matches,
  PAGE_FORMAT,
  parseIfNoneMatch,
} from '../../src/routes/public/v1/etag.js'

const PAGE = {
  list: '/customers',
  fields: ['id', 'createdAt'],
  orgId: 'org_a',
  query: '{"limit":50,"offset":0}',
  version: '42',
  latest: '1764892800000000',
}

describe('list ETags', () => {
  it('are strong, name the version, and differ by everything the representation depends on', () => {
    const tag = listEtag(PAGE, 'identity')
    expect(tag).toMatch(/^"42-[A-Za-z0-9_-]{22}"$/)
    expect(listEtag({ ...PAGE }, 'identity')).toBe(tag)
    const others = [
      listEtag(PAGE, 'gzip'),
      listEtag(PAGE, 'br'),
      listEtag({ ...PAGE, list: '/appointments' }, 'identity'),
      listEtag({ ...PAGE, fields: ['id'] }, 'identity'),
      listEtag({ ...PAGE, orgId: 'org_b' }, 'identity'),
      listEtag({ ...PAGE, query: '{"limit":50,"offset":50}' }, 'identity'),
      listEtag({ ...PAGE, version: '43' }, 'identity'),
      // The same count of changes with another history (a copy of the database written after it was made).
      listEtag({ ...PAGE, latest: '1764892800000001' }, 'identity'),
      listEtag({ ...PAGE, latest: null }, 'identity'),
    ]
    expect(new Set([tag, ...others]).size).toBe(others.length + 1)
  })

  it('leave the time out for a list whose changes have none: the tag an earlier release gave its page', () => {
    const { latest: _, ...untimed } = PAGE
    const earlier = createHash('sha256')
      .update(
        JSON.stringify([
          PAGE_FORMAT,
          untimed.list,
          untimed.fields,
          untimed.orgId,
          untimed.query,
          '42',
          'identity',
        ]),
      )
      .digest('base64url')
      .slice(0, 22)
    expect(listEtag({ ...PAGE, latest: null }, 'identity')).toBe(`"42-${earlier}"`)
  })

  it('If-None-Match is read as RFC 9110 says: *, lists, weak tags; only our tags name versions', () => {
    const tag = listEtag(PAGE, 'identity')
    expect(parseIfNoneMatch(undefined)).toBeUndefined()
    expect(parseIfNoneMatch('garbage')).toBeUndefined()
    expect(parseIfNoneMatch(' * ')).toEqual({ any: true })
    expect(knownVersions(parseIfNoneMatch('*'))).toBe('any')
    const listed = parseIfNoneMatch(`"a,b", W/${tag}, "7-x"`)
    expect(listed && matches(listed, tag)).toBe(true)
    expect(knownVersions(listed)).toEqual(['42'])
    // Leading zeros, too many digits, a short digest: not ours.
    const old = `"042-${'a'.repeat(22)}", "1234567890123456789-${'a'.repeat(22)}", "5-abc"`
    expect(knownVersions(parseIfNoneMatch(old))).toEqual([])
    expect(knownVersions(undefined)).toEqual([])
    const many = Array.from({ length: 40 }, (_, i) => `"${i + 1}-${'a'.repeat(22)}"`).join(', ')
    expect(knownVersions(parseIfNoneMatch(many))).toHaveLength(32)
  })
})
