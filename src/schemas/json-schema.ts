import type { z } from 'zod'
import { zodToJsonSchema } from 'zod-to-json-schema'

export type JsonSchema = Record<string, unknown>

/** JSON Schema (2020-12 compatible, as OpenAPI 3.1 uses) of what a schema accepts on input. */
export function jsonSchemaOf(schema: z.ZodTypeAny): JsonSchema {
  const { $schema: _ignored, ...rest } = zodToJsonSchema(schema, {
    target: 'jsonSchema7',
    $refStrategy: 'none',
    effectStrategy: 'input',
  }) as JsonSchema
  return rest
}
