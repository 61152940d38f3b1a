import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultAppName, derivedQueuePrefix, hasHashTag, queuePrefixOf } from './queue-prefix';

describe('queue prefixes', () => {
  it('derive one prefix per database, schema and app, the same on every instance', () => {
    const base = derivedQueuePrefix('shop', 'public', 'orders');
    expect(base).toMatch(/^idem-wf-[0-9a-f]{12}$/);
    expect(derivedQueuePrefix('shop', 'public', 'orders')).toBe(base);
    expect(new Set([base, derivedQueuePrefix('shop2', 'public', 'orders'), derivedQueuePrefix('shop', 'other', 'orders'), derivedQueuePrefix('shop', 'public', 'billing')]).size).toBe(4);
    // No ambiguity when parts contain the separator.
    expect(derivedQueuePrefix('a/b', 'c', '')).not.toBe(derivedQueuePrefix('a', 'b/c', ''));
  });

  it('read the app name from package.json in the working directory, or give ""', () => {
    const dir = mkdtempSync(join(tmpdir(), 'qp-'));
    expect(defaultAppName(dir)).toBe('');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: '@acme/payments' }));
    expect(defaultAppName(dir)).toBe('@acme/payments');
  });

  it('give each queue its own hash tag on a Redis Cluster unless the prefix carries one', () => {
    expect(queuePrefixOf('idem-wf-abc', 'steps', true)).toBe('{idem-wf-abc:steps}');
    expect(queuePrefixOf('{wf}', 'steps', true)).toBe('{wf}');
    expect(queuePrefixOf('idem-wf-abc', 'steps', false)).toBe('idem-wf-abc');
    expect(hasHashTag('a{}b')).toBe(false);
    expect(hasHashTag('a{x}b')).toBe(true);
  });
});
