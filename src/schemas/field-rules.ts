import type { FieldType } from './descriptions.js'

/**
 * What a value of one field type may be, written once: the import's record check
 * (src/import/records.ts), the API's item schema and so the OpenAPI document (resources.ts), and
 * the database's CHECK (`checkOf`, which migration 020 and test/store/field-checks.test.ts hold
 * every described column to) are made from it. The salon software writes the tables directly, so
 * the CHECK is the only one of the three that stands between it and the data.
 */
export interface FieldRule {
  /** The column's type, as PostgreSQL's format_type names it: what the type refuses needs no CHECK. */
  readonly sqlType: 'text' | 'integer' | 'date' | 'timestamp with time zone' | 'boolean'
  /** In characters; the import counts UTF-16 units, never fewer, so it refuses no less than the table. */
  readonly minLength?: number
  readonly maxLength?: number
  /**
   * Anchored, and written in the subset that JavaScript and PostgreSQL read alike (`[…]`, `{n}`):
   * PostgreSQL's `\d` and JavaScript's differ outside ASCII. On a text column only, a CHECK.
   */
  readonly pattern?: string
  /** The import's message when the pattern does not match. */
  readonly patternMessage?: string
  readonly minimum?: number
  /** The integer column's own bound: the type refuses more, so no CHECK says it. */
  readonly maximum?: number
  /**
   * A date's or a timestamp's span, both ends included, in UTC: the API writes a year of four
   * digits (RFC 3339), and the types also take `infinity`, `-infinity`, years before 1 and after
   * 9999, which it cannot say. A CHECK.
   */
  readonly range?: { readonly from: string; readonly to: string }
  /** The enumeration's values: the CHECK's `IN` list. */
  readonly values?: readonly string[]
  /** How docs/writers.md says the rule (test/docs/writers-columns.test.ts holds its table to it). */
  readonly words: string
  /**
   * Values the rule refuses, one for each of its parts, and values it takes at its edges: a test
   * writes each into every column of the type (test/store/field-checks.test.ts) and holds the
   * import's check to the same (test/unit/field-rules.test.ts).
   */
  readonly refused: readonly (string | number)[]
  readonly accepted: readonly (string | number | boolean)[]
}

const DAY = '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'

type NamedType = Exclude<FieldType, readonly string[]>

export const FIELD_RULES = {
  id: {
    sqlType: 'text',
    minLength: 1,
    maxLength: 128,
    words: '1-128 characters',
    refused: ['', 'i'.repeat(129)],
    accepted: ['i', 'i'.repeat(128)],
  },
  text: {
    sqlType: 'text',
    maxLength: 10_000,
    words: 'at most 10,000 characters',
    refused: ['t'.repeat(10_001)],
    accepted: ['', 't'.repeat(10_000)],
  },
  timestamp: {
    sqlType: 'timestamp with time zone',
    range: { from: '0001-01-01T00:00:00Z', to: '9999-12-31T23:59:59.999999Z' },
    words: 'a `timestamptz` from year 1 to 9999 in UTC',
    refused: ['infinity', '-infinity', '9999-12-31T23:59:59.500-15:00', '0001-01-01T00:00:00.000+01:00'],
    accepted: ['2025-06-01T10:00:00.000Z', '0001-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z'],
  },
  date: {
    sqlType: 'date',
    pattern: DAY,
    patternMessage: 'must be YYYY-MM-DD',
    range: { from: '0001-01-01', to: '9999-12-31' },
    words: 'a `date` from year 1 to 9999',
    refused: ['infinity', '-infinity', '10000-01-01'],
    accepted: ['1990-02-28', '0001-01-01', '9999-12-31'],
  },
  day: {
    sqlType: 'text',
    pattern: DAY,
    patternMessage: 'must be YYYY-MM-DD',
    words: '`YYYY-MM-DD`',
    refused: ['2025-6-01', '2025-06-01T00:00'],
    accepted: ['2025-06-01'],
  },
  boolean: { sqlType: 'boolean', words: 'a `boolean`', refused: [], accepted: [true, false] },
  cents: {
    sqlType: 'integer',
    minimum: 0,
    maximum: 2_147_483_647,
    words: 'NULL or ≥ 0',
    refused: [-1],
    accepted: [0, 2_147_483_647],
  },
  country: {
    sqlType: 'text',
    pattern: '^[A-Z]{2}$',
    patternMessage: 'must be an ISO 3166-1 alpha-2 code',
    words: 'two capital letters (ISO 3166-1 alpha-2)',
    refused: ['fr', 'FRA'],
    accepted: ['FR'],
  },
  currency: {
    sqlType: 'text',
    pattern: '^[A-Z]{3}$',
    patternMessage: 'must be an ISO 4217 code',
    words: 'three capital letters (ISO 4217)',
    refused: ['eur', 'EU'],
    accepted: ['EUR'],
  },
} as const satisfies Record<NamedType, FieldRule>

/** The rule of a field type; an enumeration's is its values. */
export function ruleOf(type: FieldType): FieldRule {
  if (typeof type === 'string') return FIELD_RULES[type]
  return {
    sqlType: 'text',
    values: type,
    words: "one of the values the table's CHECK lists",
    // Case matters: a value the enumeration has, in capitals, is not one of them.
    refused: [type[0].toUpperCase(), ''],
    accepted: type,
  }
}

const literal = (value: string) => `'${value.replaceAll("'", "''")}'`

/**
 * The CHECK expression that enforces the rule on `column`, as a migration writes it; undefined
 * when the column's type is the whole rule (a boolean).
 */
export function checkOf(column: string, type: FieldType): string | undefined {
  const rule = ruleOf(type)
  const parts: string[] = []
  if (rule.sqlType === 'text') {
    if (rule.minLength !== undefined && rule.maxLength !== undefined)
      parts.push(`length(${column}) BETWEEN ${rule.minLength} AND ${rule.maxLength}`)
    else if (rule.maxLength !== undefined) parts.push(`length(${column}) <= ${rule.maxLength}`)
    else if (rule.minLength !== undefined) parts.push(`length(${column}) >= ${rule.minLength}`)
    if (rule.pattern !== undefined) parts.push(`${column} ~ ${literal(rule.pattern)}`)
    if (rule.values !== undefined) parts.push(`${column} IN (${rule.values.map(literal).join(', ')})`)
  }
  if (rule.sqlType === 'integer' && rule.minimum !== undefined) parts.push(`${column} >= ${rule.minimum}`)
  if (rule.range !== undefined)
    parts.push(`${column} BETWEEN ${literal(rule.range.from)} AND ${literal(rule.range.to)}`)
  return parts.length > 0 ? parts.join(' AND ') : undefined
}

/** The name a CHECK on one column takes: PostgreSQL's own for a column constraint. */
export const checkName = (table: string, column: string): string => `${table}_${column}_check`
