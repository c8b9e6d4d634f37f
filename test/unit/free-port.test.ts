import { describe, expect, it } from 'vitest'
import { freePort } from '../helpers/process.js'

describe('freePort (test helper)', () => {
  it('never hands out the same port twice: PORT and OPS_PORT drawn before a server listens differ', async () => {
    // The kernel gives a port just closed again often (75-82 repeats in 1,000 draws on Linux).
    const ports: number[] = []
    for (let i = 0; i < 1_000; i++) ports.push(await freePort())
    expect(new Set(ports).size).toBe(ports.length)
  })
})
