import { sha256 } from '../../../domain/sha256.js'
import type { KnownVersions } from '../../../queries/page-statement.js'

/**
 * Conditional pages (RFC 9110 §8.8.3, §13.1.2): a strong ETag on every list page, and
 * `If-None-Match` answered 304 without reading the page.
 *
 * A page is a function of its list's rows, the query that selects it, and the way this release
 * writes it. The list's rows are named by their version (migration 010: one organization's count
 * of its changes to one table) and the time the latest of those changes was written (018: the
 * same count reached in a copy of the database by other writes has other times), the query by
 * its checked, normalized form (two spellings of the same query select the same bytes), the
 * writing by `PAGE_FORMAT` and the item's fields, and the bytes on the wire by their
 * content-coding. The tag is `"<version>-<digest>"`: the version in
 * clear, so that the page statement can compare it without knowing the rest, and a digest of
 * everything, so that the tag names one representation only.
 */

/** Bumped whenever the same rows and query would give other bytes: the envelope, a field's format. */
export const PAGE_FORMAT = 1

/** What one page's representation depends on besides its content-coding. */
export interface PageIdentity {
  /** The list's path, e.g. `/customers`. */
  readonly list: string
  /** The item's fields in order: a field added or removed changes every tag. */
  readonly fields: readonly string[]
  /** The key's organization, which the version counts the changes of. */
  readonly orgId: string
  /** The checked query, normalized (limit, offset, filters). */
  readonly query: string
  /** The list's version, from the page's own snapshot. */
  readonly version: string
  /**
   * When the latest of the version's changes was written, from the same snapshot (null for a list
   * whose changes all predate the column): the same count reached by other writes, in a copy of
   * the database that went on from an earlier point, is another history with another tag.
   */
  readonly latest: string | null
}

/**
 * The strong ETag of a page sent with `encoding` (`identity`, `gzip`, `br`): two content-codings
 * of the same page are two representations, with two tags (RFC 9110 §8.8.3.3).
 */
export function listEtag(page: PageIdentity, encoding: string): string {
  const named = [PAGE_FORMAT, page.list, page.fields, page.orgId, page.query, page.version, encoding]
  // Without a time, the tag an earlier release gave the same page: an upgrade costs no re-read.
  if (page.latest !== null) named.push(page.latest)
  const digest = sha256(JSON.stringify(named), 'base64url').slice(0, 22)
  return `"${page.version}-${digest}"`
}

/** Our opaque tags: the version, then the digest (132 bits of base64url). */
const OUR_TAG = /^(0|[1-9]\d{0,17})-[A-Za-z0-9_-]{22}$/
/** An entity-tag of a list (RFC 9110 §8.8.3), weak or strong; `etagc` excludes only DQUOTE and controls. */
const ENTITY_TAG = /(?:W\/)?"([\x21\x23-\x7e\x80-\xff]*)"/g
/**
 * At most this many tags of an If-None-Match header are considered, the first ones (a client
 * holds one per page): the tags after them are ignored, and a request whose only matching tag
 * comes later gets the page (200), as without the header. Said in the OpenAPI document.
 */
export const MAX_IF_NONE_MATCH_TAGS = 32

/** What an `If-None-Match` asks: any current representation (`*`), or one of these tags. */
export type IfNoneMatch = { readonly any: true } | { readonly any: false; readonly tags: ReadonlySet<string> }

/**
 * The header's condition, or undefined when there is none to evaluate (absent, or no tag in it).
 * Weak comparison, as the RFC says for If-None-Match: `W/"x"` matches `"x"`. Tags we never made
 * match nothing and cost nothing.
 */
export function parseIfNoneMatch(header: string | undefined): IfNoneMatch | undefined {
  if (header === undefined) return undefined
  if (header.trim() === '*') return { any: true }
  const tags = new Set<string>()
  for (const match of header.matchAll(ENTITY_TAG)) {
    if (tags.size >= MAX_IF_NONE_MATCH_TAGS) break
    tags.add(`"${match[1]}"`)
  }
  return tags.size > 0 ? { any: false, tags } : undefined
}

/** The versions the page statement compares with its list's: those our tags name. */
export function knownVersions(condition: IfNoneMatch | undefined): KnownVersions {
  if (condition === undefined) return []
  if (condition.any) return 'any'
  const versions = new Set<string>()
  for (const tag of condition.tags) {
    const version = OUR_TAG.exec(tag.slice(1, -1))?.[1]
    if (version !== undefined) versions.add(version)
  }
  return [...versions]
}

/** Whether `etag`, the current representation's, meets the condition (then: 304). */
export const matches = (condition: IfNoneMatch, etag: string) => condition.any || condition.tags.has(etag)
