import { describe, expect, it } from 'vitest'
import {
  type BenchReport,
  checks,
  cpuMicros,
  cpuSpeedup,
  type MixResult,
  microsPerRequest,
  type ScaleReport,
  verdict,
} from '../checks.js'
import type { TargetResult } from '../measure.js'
import { SCALES } from '../options.js'

/** A target's figures: req/s and PostgreSQL's share of one core at saturation, p50 and p99 at half load. */
function target(rps: number, pgPercent: number, p50: number, p99: number): TargetResult {
  return {
    saturation: {
      rps,
      p50: null,
      p99: null,
      ok: rps,
      failures: 0,
      serverCpu: 50,
      postgresCpu: pgPercent,
      otherCpu: 0,
    },
    half: { rps: rps / 2, p50, p99, ok: rps / 2, failures: 0 },
  }
}

function mix(id: string, size: MixResult['size'], targets: Partial<MixResult>): MixResult {
  return {
    id,
    label: id,
    size,
    position: 'first',
    path: `/${id}`,
    pgbench: target(750, 100, 1, 4),
    baseline: target(500, 100, 2, 8),
    openbook: target(500, 50, 2, 8),
    clientEncoding: { ...target(400, 40, 2, 8).saturation, serverCpu: 30 },
    previous: target(300, 100, 3, 12),
    ...targets,
  }
}

function report(mixes: MixResult[], embeddedRps = 450, embeddedRss = 250): BenchReport {
  const scale: ScaleReport = {
    scale: SCALES['100k'],
    seed: {
      fresh: true,
      seconds: 1,
      rowsPerSecond: 1,
      wallSeconds: 1,
      vacuumSeconds: 1,
      counts: {} as never,
    },
    orgs: [],
    explain: [],
    mixes,
    rss: { openbookMb: 150, baselineMb: 120 },
    loadAverage: { start: [1, 1, 1], end: [1, 1, 1] },
  }
  return {
    previous: { dir: '/tmp/old', commit: 'a58049a' },
    scales: [scale],
    embedded: {
      rssMb: embeddedRss,
      mixes: [
        {
          id: 'emb',
          label: 'emb',
          path: '/',
          result: { rps: embeddedRps, p50: 1, p99: 2, ok: 1, failures: 0 },
          serverCpu: 100,
          otherCpu: 0,
          loopDelay: { p50: 1, p99: 2, max: 3, mean: 1, at: 0 },
        },
      ],
    },
  } as unknown as BenchReport
}

const byTarget = (r: BenchReport) => new Map(checks(r).map((check) => [check.target.split(':')[0], check]))
const find = (r: BenchReport, start: string) => checks(r).find((check) => check.target.startsWith(start))

describe('microsPerRequest', () => {
  it('divides CPU time by the requests answered', () => {
    // Half a core at 500 requests per second: 1 ms of CPU each.
    expect(microsPerRequest(50, 500)).toBe(1000)
    expect(microsPerRequest(null, 500)).toBeNull()
    expect(microsPerRequest(50, 0)).toBeNull()
  })
})

describe('CPU per request', () => {
  it("adds Node's and PostgreSQL's, and compares targets by it", () => {
    // Node 50 % and PostgreSQL 50 % of a core at 500/s: 1,000 + 1,000 µs.
    expect(cpuMicros(target(500, 50, 2, 8))).toBe(2000)
    const m = mix('cus-s-first', 'small', { previous: target(250, 50, 2, 8) })
    // The older build: 2,000 + 2,000 µs per request, twice openbook's.
    expect(cpuSpeedup(m, 'previous')).toBe(2)
    expect(cpuSpeedup({ ...m, previous: undefined }, 'previous')).toBeUndefined()
  })
})

describe('checks', () => {
  it('meet every target when the figures do', () => {
    // Node 500 µs a request against PostgreSQL's 1,000.
    const openbook = {
      ...target(500, 50, 2, 8),
      saturation: { ...target(500, 50, 2, 8).saturation, serverCpu: 25 },
    }
    const r = report([mix('cus-s-first', 'small', { openbook }), mix('cus-l-middle', 'large', { openbook })])
    for (const check of checks(r)) expect([check.target, check.met]).toEqual([check.target, true])
    expect(byTarget(r).size).toBe(checks(r).length)
  })

  it('hold the largest organization to p50 ≤ 5 ms on every page', () => {
    const slow = mix('cus-l-middle', 'large', { openbook: target(500, 50, 8.9, 20) })
    const check = find(report([mix('cus-s-first', 'small', {}), slow]), 'largest organization')
    expect(check?.met).toBe(false)
    expect(check?.figures).toContain('100k cus-l-middle 8.90')
  })

  it('want PostgreSQL CPU per request 40 % below the older build, small and medium only', () => {
    // 50 % of a core at 500/s (1,000 µs) against 100 % at 300/s (3,333 µs): −70 %.
    expect(find(report([mix('cus-s-first', 'small', {})]), 'PostgreSQL CPU')?.met).toBe(true)
    const close = mix('cus-s-first', 'small', { previous: target(500, 80, 2, 8) })
    const check = find(report([close]), 'PostgreSQL CPU')
    expect(check?.met).toBe(false)
    expect(check?.figures).toContain('1,000 vs 1,600 µs (−38 %)')
    // A large organization's mix does not count for this target.
    const large = mix('cus-l-first', 'large', { previous: target(500, 50, 2, 8) })
    expect(find(report([mix('cus-s-first', 'small', {}), large]), 'PostgreSQL CPU')?.met).toBe(true)
  })

  it('want 1.3× the older build’s req/s on small and medium mixes', () => {
    const check = find(report([mix('apt-m-dates', 'medium', { previous: target(400, 100, 2, 8) })]), 'req/s')
    expect(check?.met).toBe(false)
    expect(check?.figures).toBe('100k apt-m-dates 1.25×')
  })

  it("hold openbook to 0.6× pgbench's req/s, 0.5× with the client's encoding, and Node to 0.6× PostgreSQL's CPU", () => {
    const r = report([
      mix('cus-s-first', 'small', {}),
      mix('apt-l-middle', 'large', {
        pgbench: target(1_000, 100, 1, 4),
        clientEncoding: { ...target(450, 45, 2, 8).saturation, serverCpu: 40 },
        openbook: target(550, 50, 2, 8),
      }),
    ])
    const identity = find(r, 'openbook ≥ 0.6× pgbench')
    expect(identity?.met).toBe(false)
    expect(identity?.figures).toContain('1 of 2 outside: 100k apt-l-middle 0.55')
    const encoded = find(r, 'openbook ≥ 0.5× pgbench')
    expect(encoded?.met).toBe(false)
    expect(encoded?.figures).toContain('100k apt-l-middle 0.45')
    // 50 % of a core for Node and for PostgreSQL at 550/s: 1.00.
    const node = find(r, "openbook's Node CPU")
    expect(node?.met).toBe(false)
    expect(node?.figures).toContain('100k apt-l-middle 1.00')
    // A run without pgbench or without the client's encoding proves nothing of these.
    const unmeasured = report([
      mix('cus-s-first', 'small', { pgbench: undefined, clientEncoding: undefined }),
    ])
    expect(find(unmeasured, 'openbook ≥ 0.6× pgbench')?.met).toBe(false)
    expect(
      verdict(find(unmeasured, 'openbook ≥ 0.5× pgbench') ?? { target: '', met: false, figures: '' }),
    ).toBe('not measurable')
  })

  it('read the same ceiling bounds of the minimal handler, without deciding them by it', () => {
    const r = report([
      // The minimal handler: 500/s against pgbench's 750 (0.67), Node 50 % against PostgreSQL's
      // 100 % of a core (0.50); openbook's the same 0.67, but Node 1.00.
      mix('cus-s-first', 'small', {}),
      // The minimal handler: 550/1,000 (0.55) and Node 50 % against 25 % (2.00).
      mix('apt-l-middle', 'large', {
        pgbench: target(1_000, 100, 1, 4),
        baseline: target(550, 25, 2, 8),
        openbook: target(650, 50, 2, 8),
      }),
    ])
    const identity = find(r, 'openbook ≥ 0.6× pgbench')
    expect(identity?.met).toBe(true)
    expect(identity?.figures).toContain(
      '. The minimal handler on the same mixes: 0.55 to 0.67, 1 of 2 outside',
    )
    const node = find(r, "openbook's Node CPU")
    expect(node?.met).toBe(false)
    expect(node?.figures).toContain('. The minimal handler on the same mixes: 0.50 to 2.00, 1 of 2 outside')
    // The client's encoding is openbook's alone: nothing of the minimal handler is said.
    expect(find(r, 'openbook ≥ 0.5× pgbench')?.figures).not.toContain('minimal handler')
  })

  it('compare openbook with the minimal handler on every mix', () => {
    const check = find(
      report([mix('cus-l-last', 'large', { baseline: target(600, 100, 2, 8) })]),
      'openbook ≥ 0.9×',
    )
    expect(check?.met).toBe(false)
    expect(check?.figures).toContain('cus-l-last 0.83×')
    expect(check?.figures).toContain('side by side at the same time not measured')
  })

  it('show the ratio of openbook and the minimal handler loaded side by side, without deciding the check', () => {
    const tilted = mix('cus-l-last', 'large', {
      baseline: target(600, 100, 2, 8),
      sideBySide: [0.97, 0.93, 1.01],
    })
    const check = find(
      report([tilted, mix('cus-s-first', 'small', { sideBySide: [0.8, 0.85, 0.95] })]),
      'openbook ≥ 0.9×',
    )
    expect(check?.met).toBe(false)
    // The medians: 0.97 and 0.85.
    expect(check?.figures).toContain('side by side at the same time 0.85–0.97×, 1 of 2 below 0.9×')
  })

  it('hold p99 ≤ 10 ms only where the minimal handler reaches it', () => {
    const both = mix('cus-s-first', 'small', {
      baseline: target(500, 100, 2, 12),
      openbook: target(500, 50, 2, 14),
    })
    const fast = mix('cus-m-middle', 'medium', {})
    const held = find(report([both, fast]), 'p99')
    expect(held?.met).toBe(true)
    expect(held && verdict(held)).toBe('yes')
    // Nowhere within reach of the minimal handler: nothing was shown, so not met, and not missed.
    const vacuous = find(report([both]), 'p99')
    expect(vacuous?.met).toBe(false)
    expect(vacuous?.figures).toContain('not measurable')
    expect(vacuous && verdict(vacuous)).toBe('not measurable')
    const onlyMinimal = mix('cus-s-first', 'small', { openbook: target(500, 50, 2, 14) })
    const missed = find(report([onlyMinimal]), 'p99')
    expect(missed?.met).toBe(false)
    expect(missed && verdict(missed)).toBe('**no**')
  })

  it('hold the embedded store to 300 MB and 400 req/s', () => {
    const r = report([mix('cus-s-first', 'small', {})], 380, 320)
    expect(find(r, 'embedded store: peak RSS')?.met).toBe(false)
    expect(find(r, 'embedded store ≥ 400')?.met).toBe(false)
  })

  it('leave out the comparisons with an older build when there is none', () => {
    const r = { ...report([mix('cus-s-first', 'small', { previous: undefined })]), previous: undefined }
    expect(checks(r).some((check) => check.target.includes('a58049a'))).toBe(false)
  })
})
