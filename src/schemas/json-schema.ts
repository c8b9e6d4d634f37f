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

/**
 * JSON Schema of a response body, open to fields added within v1: the server's schemas are
 * strict (only declared fields leave it), but the published ones do not say
 * `additionalProperties: false`, so that a consumer that validates with the document still takes
 * a page after a field was added. The contract tells consumers to ignore unknown fields.
 */
export function responseSchemaOf(schema: z.ZodTypeAny): JsonSchema {
  return openToAdditions(jsonSchemaOf(schema)) as JsonSchema
}

function openToAdditions(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(openToAdditions)
  if (node === null || typeof node !== 'object') return node
  return Object.fromEntries(
    Object.entries(node)
      .filter(([key, value]) => !(key === 'additionalProperties' && value === false))
      .map(([key, value]) => [key, openToAdditions(value)]),
  )
}
