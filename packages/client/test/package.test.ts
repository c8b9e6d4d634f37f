import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const root = new URL('../', import.meta.url)

describe('package layout', () => {
  it('is an ESM package with declarations and no runtime dependencies', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'))
    expect(pkg.name).toBe('@openbook/client')
    expect(pkg.type).toBe('module')
    expect(pkg.dependencies ?? {}).toEqual({})
    expect(pkg.exports['.'].types).toBe('./dist/index.d.ts')
  })

  it('is built to dist with type declarations', async () => {
    expect(existsSync(new URL('dist/index.js', root))).toBe(true)
    expect(existsSync(new URL('dist/index.d.ts', root))).toBe(true)
    const built = await import(new URL('dist/index.js', root).href)
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'))
    expect(built.CLIENT_VERSION).toBe(pkg.version)
  })
})
