import { setFlagsFromString } from 'node:v8'

/**
 * Turns off V8's allocation-site pretenuring for this process. Under load, V8 decides to allocate
 * some short-lived objects of the request path straight into the old generation; the young
 * objects they point to then outlive every young-generation collection until a full one. With it
 * on, each young collection of the PostgreSQL server under load kept about 2.3 MB alive instead of
 * 0.4 MB, its pauses tripled, and Node spent 100-200 µs more per request (bench/RESULTS.md,
 * "Allocation-site pretenuring"). V8 reads the flag at each collection, so setting it at start-up,
 * before any load, takes effect.
 */
export function tuneGarbageCollector(): void {
  setFlagsFromString('--no-allocation-site-pretenuring')
}
