/** The COPY statement both stores run; `source` is STDIN or PGlite's '/dev/blob'. */
export const copyStatement = (table: string, columns: readonly string[], source: string) =>
  `COPY ${table} (${columns.join(', ')}) FROM ${source}`
