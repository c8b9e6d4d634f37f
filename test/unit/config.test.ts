import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../src/config.js'

describe('the environment, validated once at start', () => {
  it('defaults', () => {
    expect(loadConfig({})).toEqual({
      port: 3000,
      host: '127.0.0.1',
      databaseUrl: undefined,
      databaseReadUrl: undefined,
      databaseReadMaxLagMs: 5000,
      databasePreparedStatements: 'on',
      databasePoolSize: 10,
      databaseIdleTimeoutMs: 10_000,
      databasePipelineDepth: 4,
      dataDir: './data',
      apiKeyBrand: 'svc',
      logLevel: 'info',
      opsPort: 9464,
      opsPortFromEnv: false,
      opsHost: '127.0.0.1',
      shutdownDelayMs: 0,
      readyOutageGraceMs: 10_000,
      requestDeadlineMs: 8_000,
      listFoldIntervalMs: 1_000,
    })
  })

  it('reads every setting, an empty one counting as unset', () => {
    const config = loadConfig({
      PORT: '8080',
      OPS_PORT: '0',
      DATABASE_URL: 'postgres://a@db/x',
      DATABASE_READ_URL: 'postgresql://a@replica/x',
      DATABASE_READ_MAX_LAG_MS: '250',
      DATABASE_PREPARED_STATEMENTS: 'off',
      DATABASE_POOL_SIZE: '4',
      DATABASE_IDLE_TIMEOUT_MS: '0',
      DATABASE_PIPELINE_DEPTH: '1',
      SHUTDOWN_DELAY_MS: '2000',
      READY_OUTAGE_GRACE_MS: '3000',
      REQUEST_DEADLINE_MS: '4500',
      LIST_FOLD_INTERVAL_MS: '250',
      HOST: '',
    })
    expect(config).toMatchObject({
      port: 8080,
      opsPort: 0,
      opsPortFromEnv: true,
      host: '127.0.0.1',
      databaseReadUrl: 'postgresql://a@replica/x',
      databaseReadMaxLagMs: 250,
      databasePreparedStatements: 'off',
      databasePoolSize: 4,
      databaseIdleTimeoutMs: 0,
      databasePipelineDepth: 1,
      shutdownDelayMs: 2000,
      readyOutageGraceMs: 3000,
      requestDeadlineMs: 4500,
      listFoldIntervalMs: 250,
    })
  })

  it.each(['on', 'pooler', 'off'])('reads DATABASE_PREPARED_STATEMENTS=%s', (value) => {
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: value }).databasePreparedStatements).toBe(value)
  })

  it.each([
    [{ OPS_PORT: 'x' }, 'invalid OPS_PORT: must be a port number'],
    [{ PORT: '70000' }, 'invalid PORT: Number must be less than or equal to 65535'],
    [{ SHUTDOWN_DELAY_MS: '1e3' }, 'invalid SHUTDOWN_DELAY_MS: must be a whole number of milliseconds'],
    [
      { DATABASE_PIPELINE_DEPTH: '0' },
      'invalid DATABASE_PIPELINE_DEPTH: Number must be greater than or equal to 1',
    ],
    [
      { DATABASE_PIPELINE_DEPTH: '9' },
      'invalid DATABASE_PIPELINE_DEPTH: Number must be less than or equal to 8',
    ],
    [
      { SHUTDOWN_DELAY_MS: '700000' },
      'invalid SHUTDOWN_DELAY_MS: Number must be less than or equal to 600000',
    ],
    [
      { DATABASE_READ_URL: 'mysql://x' },
      'invalid DATABASE_READ_URL: must be a postgres:// or postgresql:// URL',
    ],
    [
      { DATABASE_READ_URL: 'postgres://a@replica/x' },
      'invalid DATABASE_READ_URL: a read replica needs DATABASE_URL (the primary) as well',
    ],
    [{ LIST_FOLD_INTERVAL_MS: '50' }, 'invalid LIST_FOLD_INTERVAL_MS: must be at least 100'],
    [
      { LIST_FOLD_INTERVAL_MS: '90000' },
      'invalid LIST_FOLD_INTERVAL_MS: Number must be less than or equal to 60000',
    ],
    [{ DATABASE_PREPARED_STATEMENTS: 'maybe' }, /^invalid DATABASE_PREPARED_STATEMENTS: /],
    [{ DATABASE_POOL_SIZE: '0' }, 'invalid DATABASE_POOL_SIZE: Number must be greater than or equal to 1'],
    [{ DATABASE_POOL_SIZE: 'ten' }, 'invalid DATABASE_POOL_SIZE: must be a whole number of connections'],
  ])('refuses %o in one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError)
    expect(() => loadConfig(env)).toThrow(message)
  })
})
