/** The fields of the DataRow message whose field count is at `offset` of `bytes`, as text (NULL as null). */
export function dataRowValues(bytes: Buffer, offset: number): (string | null)[] {
  const values: (string | null)[] = []
  let at = offset + 2
  for (let i = 0; i < bytes.readInt16BE(offset); i++) {
    const length = bytes.readInt32BE(at)
    at += 4
    values.push(length === -1 ? null : bytes.toString('utf8', at, at + length))
    at += Math.max(length, 0)
  }
  return values
}
