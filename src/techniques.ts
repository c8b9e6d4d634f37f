/**
 * The request path's techniques that cost the reader the most, each on in every build. They are
 * named here, rather than hidden in the code that uses them, so that the yardstick benchmark can
 * switch one off before the server starts (bench/technique-off.mjs) and measure its share alone
 * (docs/design/techniques.md). Nothing in src/ writes them.
 */
export const techniques: {
  oneTrip: boolean
  sqlExecute: boolean
  textTimestamps: boolean
  rowBytes: boolean
} = {
  /** The page travels in the key lookup's message, before the key is known (plugins/auth.ts). */
  oneTrip: true,
  /**
   * With `oneTrip` off: the page still by SQL-level PREPARE and EXECUTE with literals
   * (store/postgres/connection.ts); off too, by the extended protocol's named statement.
   */
  sqlExecute: true,
  /**
   * The rows form reads timestamps and dates as PostgreSQL's text, which Node makes ISO
   * (queries/page-statement.ts); off, the SQL writes them with to_char.
   */
  textTimestamps: true,
  /**
   * On PostgreSQL, the page's items are written from the bytes of its rows as they arrive
   * (store/postgres/row-tap.ts, queries/page-bytes.ts); off, from the rows pg makes
   * (queries/page-rows.ts).
   */
  rowBytes: true,
}
