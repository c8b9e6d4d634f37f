import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { generateSecret, hashSecret, hintOf, secretPattern } from '../../src/domain/api-key-secret.js'

describe('API key secrets', () => {
  it('<brand>_<env>_ and 64 lowercase hex characters; the hash is the SHA-256 of the whole secret', () => {
    for (const env of ['test', 'live'] as const) {
      const made = generateSecret('svc', env)
      expect(made.secret).toMatch(new RegExp(`^svc_${env}_[0-9a-f]{64}$`))
      expect(made.prefix).toBe(`svc_${env}_`)
      expect(made.hash).toBe(createHash('sha256').update(made.secret).digest('hex'))
      expect(made.hash).toBe(hashSecret(made.secret))
      expect(made.secret).toMatch(secretPattern('svc'))
    }
  })

  it('never repeats', () => {
    const secrets = new Set(Array.from({ length: 1_000 }, () => generateSecret('svc', 'test').secret))
    expect(secrets.size).toBe(1_000)
  })

  it('the hint shows the prefix and the last four characters, never enough to use the key', () => {
    const secret = `svc_live_${'0'.repeat(60)}beef`
    expect(hintOf(secret)).toBe('svc_live_…beef')
    expect(generateSecret('acme', 'test').hint).toMatch(/^acme_test_…[0-9a-f]{4}$/)
  })

  it('the pattern matches exactly the keys of this brand', () => {
    const pattern = secretPattern('svc')
    const hex = 'ab'.repeat(32)
    expect(pattern.test(`svc_test_${hex}`)).toBe(true)
    expect(pattern.test(`svc_live_${hex}`)).toBe(true)
    for (const other of [
      `acme_test_${hex}`,
      `svc_prod_${hex}`,
      `svc_test_${hex.toUpperCase()}`,
      `svc_test_${hex}0`,
      `svc_test_${hex.slice(1)}`,
      ` svc_test_${hex}`,
      `svc_test_${hex}\n`,
    ]) {
      expect(pattern.test(other), other).toBe(false)
    }
  })
})
