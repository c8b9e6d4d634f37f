import { describe, expect, it } from 'vitest'
import {
  ALLOWED_METHODS,
  ApiError,
  type ApiErrorCode,
  invalidApiKey,
  methodNotAllowed,
  missingApiKey,
  statusOf,
} from '../../src/errors.js'
import { errorSchema } from '../../src/schemas/envelope.js'

/** The closed set of API errors: one status each, one body shape for all. */
const STATUSES: Record<ApiErrorCode, number> = {
  invalid_query: 400,
  bad_request: 400,
  missing_api_key: 401,
  invalid_api_key: 401,
  expired_api_key: 401,
  revoked_api_key: 401,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  header_too_large: 431,
  internal_error: 500,
  service_unavailable: 503,
  overloaded: 503,
}

describe('API errors', () => {
  it.each(Object.entries(STATUSES))('%s is %i, with a body of the documented shape', (code, status) => {
    const error = new ApiError(code as ApiErrorCode, 'what happened')
    expect(statusOf(code as ApiErrorCode)).toBe(status)
    expect(error.statusCode).toBe(status)
    const body = error.toBody()
    expect(errorSchema.parse(body)).toEqual(body)
    expect(body).toMatchObject({ message: 'what happened', code })
    expect(body.error).toMatch(/^[A-Z][A-Za-z ]+$/)
    expect(body).not.toHaveProperty('details')
  })

  it('carries details only when given', () => {
    const details = [{ code: 'too_big', path: ['limit'], message: 'limit must be at most 100' }]
    expect(new ApiError('invalid_query', 'Invalid query', details).toBody()).toEqual({
      error: 'Invalid query parameters',
      message: 'Invalid query',
      code: 'invalid_query',
      details,
    })
  })

  it('401s say how to authenticate; 405 says what is allowed', () => {
    expect(missingApiKey().headers).toEqual({ 'www-authenticate': 'Bearer realm="openbook"' })
    expect(invalidApiKey().headers['www-authenticate']).toBe('Bearer realm="openbook", error="invalid_token"')
    expect(missingApiKey().statusCode).toBe(401)
    expect(invalidApiKey().code).toBe('invalid_api_key')
    const refused = methodNotAllowed('DELETE')
    expect(refused.statusCode).toBe(405)
    expect(refused.headers).toEqual({ allow: ALLOWED_METHODS })
    expect(refused.message).toBe('Method DELETE is not allowed; this API is read-only')
  })
})
