import { z } from 'zod'

export const paginationSchema = z
  .object({
    limit: z.number().int().min(1).max(100).describe('Page size applied'),
    offset: z.number().int().min(0).describe('Rows skipped'),
    total: z.number().int().min(0).describe('Count of all matching records, not the page size'),
    hasMore: z.boolean().describe('True when more pages follow'),
  })
  .strict()

export const errorSchema = z
  .object({
    error: z.string(),
    message: z.string().optional(),
    code: z.string().optional(),
    details: z.unknown().optional(),
  })
  .strict()

export const validationIssueSchema = z
  .object({
    code: z.string(),
    path: z.array(z.union([z.string(), z.number()])),
    message: z.string(),
  })
  .passthrough()
