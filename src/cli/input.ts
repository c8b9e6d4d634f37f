import { constants, createReadStream } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { OperatorError } from '../operator-error.js'

/** Opens the input of `import`: a readable file, or `-` for standard input. */
export async function openInput(file: string): Promise<Readable> {
  if (file === '-') return process.stdin
  let isFile: boolean
  try {
    await access(file, constants.R_OK)
    isFile = (await stat(file)).isFile()
  } catch {
    throw new OperatorError(`cannot read ${file}`)
  }
  if (!isFile) throw new OperatorError(`${file} is not a file`)
  return createReadStream(file)
}
