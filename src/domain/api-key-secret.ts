import { randomBytes } from 'node:crypto'
import { sha256 } from './sha256.js'

export const KEY_ENVS = ['test', 'live'] as const
export type KeyEnv = (typeof KEY_ENVS)[number]

export interface NewSecret {
  readonly secret: string
  readonly prefix: string
  readonly hash: string
  readonly hint: string
}

/** `<brand>_<env>_` + 64 lowercase hex characters from a CSPRNG. */
export function generateSecret(brand: string, env: KeyEnv): NewSecret {
  const prefix = `${brand}_${env}_`
  const secret = prefix + randomBytes(32).toString('hex')
  return { secret, prefix, hash: hashSecret(secret), hint: hintOf(secret) }
}

export function hashSecret(secret: string): string {
  return sha256(secret, 'hex')
}

/** Enough to recognise a key in a list, never enough to use it. */
export function hintOf(secret: string): string {
  const prefix = secret.slice(0, secret.lastIndexOf('_') + 1)
  return `${prefix}…${secret.slice(-4)}`
}

/** Matches exactly the keys this deployment issues. */
export function secretPattern(brand: string): RegExp {
  return new RegExp(`^${brand}_(test|live)_[0-9a-f]{64}$`)
}
