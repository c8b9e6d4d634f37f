import { z } from 'zod'
import { paginationSchema } from '../../src/schemas/envelope.js'

/** The list envelope around `item`, strict: what a page's body must parse as. */
export function listEnvelope<Item extends z.ZodTypeAny>(item: Item) {
  return z.object({ data: z.array(item), pagination: paginationSchema }).strict()
}
