import { IdempotencyConfigError } from '../errors/idempotency-config.error';
import { resolveOptions } from '../utils/validate-options';
import { NoopObserver } from './idempotency-observer';
import { createObserver } from './observability.providers';

jest.mock('@opentelemetry/api', () => {
  throw Object.assign(new Error("Cannot find module '@opentelemetry/api' from 'lib/utils/optional-peer.ts'"), { code: 'MODULE_NOT_FOUND' });
});

const base = { postgres: { url: 'postgres://x/y' }, redis: false as const };

function problemsOf(observability: unknown): string[] {
  try {
    resolveOptions({ ...base, observability } as never);
    return [];
  } catch (err) {
    return (err as IdempotencyConfigError).problems;
  }
}

describe('observability options', () => {
  it('defaults: on when the package is installed, traces on, keys off', () => {
    expect(resolveOptions(base).observability).toEqual({ enabled: undefined, traces: true, recordKeys: false });
  });

  it('refuses unknown keys and values that are not booleans, naming the option', () => {
    expect(problemsOf({ recordKey: true })).toEqual([expect.stringMatching(/^observability\.recordKey: .*observability\.recordKeys/)]);
    expect(problemsOf({ traces: 'yes' })).toEqual([expect.stringMatching(/^observability\.traces: expected true or false/)]);
    expect(problemsOf(true)).toEqual([expect.stringMatching(/^observability: expected an object/)]);
  });

  it('without @opentelemetry/api: a no-op by default, a startup error when asked for explicitly', () => {
    expect(createObserver({ traces: true, recordKeys: false })).toBeInstanceOf(NoopObserver);
    expect(createObserver({ enabled: false, traces: true, recordKeys: false })).toBeInstanceOf(NoopObserver);
    expect(() => createObserver({ enabled: true, traces: true, recordKeys: false })).toThrow(/observability\.enabled: needs the optional peer dependency "@opentelemetry\/api"/);
  });
});
