import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultAppName, derivedQueuePrefix, hasHashTag, slotKeyOf, queuePrefixOf } from './queue-prefix';

describe('queue prefixes', () => {
  it('derive one prefix per database, schema and app, the same on every instance', () => {
    const base = derivedQueuePrefix('shop', 'public', 'orders');
    expect(base).toMatch(/^idem-wf-[0-9a-f]{12}$/);
    expect(derivedQueuePrefix('shop', 'public', 'orders')).toBe(base);
    expect(new Set([base, derivedQueuePrefix('shop2', 'public', 'orders'), derivedQueuePrefix('shop', 'other', 'orders'), derivedQueuePrefix('shop', 'public', 'billing')]).size).toBe(4);
    // No ambiguity when parts contain the separator.
    expect(derivedQueuePrefix('a/b', 'c', '')).not.toBe(derivedQueuePrefix('a', 'b/c', ''));
  });

  it('read the app name from package.json in the working directory, else above the entry script, or give ""', () => {
    const root = mkdtempSync(join(tmpdir(), 'qp-'));
    const app = join(root, 'srv', 'app');
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(join(app, 'dist'), { recursive: true });
    mkdirSync(join(app, 'node_modules', 'pm', 'bin'), { recursive: true });
    mkdirSync(elsewhere);
    const entry = join(app, 'dist', 'main.js');
    expect(defaultAppName(elsewhere, entry)).toEqual({ name: '' });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: '@acme/payments' }));
    const fromApp = { name: '@acme/payments', from: join(app, 'package.json') };
    expect(defaultAppName(app, entry)).toEqual(fromApp);
    // Started from another directory (systemd, a process manager): the same name, from above the entry script.
    expect(defaultAppName(elsewhere, entry)).toEqual(fromApp);
    expect(defaultAppName(elsewhere, 'main.js')).toEqual({ name: '' });
    // A launcher inside node_modules is skipped to the directory that holds node_modules.
    writeFileSync(join(app, 'node_modules', 'pm', 'package.json'), JSON.stringify({ name: 'pm' }));
    expect(defaultAppName(elsewhere, join(app, 'node_modules', 'pm', 'bin', 'run.js'))).toEqual(fromApp);
    // The working directory's package.json comes first, as before.
    writeFileSync(join(elsewhere, 'package.json'), JSON.stringify({ name: 'other' }));
    expect(defaultAppName(elsewhere, entry)).toEqual({ name: 'other', from: join(elsewhere, 'package.json') });
  });

  it('give each queue its own hash tag on a Redis Cluster unless the prefix carries one', () => {
    expect(queuePrefixOf('idem-wf-abc', 'steps', true)).toBe('{idem-wf-abc:steps}');
    expect(queuePrefixOf('{wf}', 'steps', true)).toBe('{wf}');
    expect(queuePrefixOf('idem-wf-abc', 'steps', false)).toBe('idem-wf-abc');
    expect(hasHashTag('a{}b')).toBe(false);
    expect(hasHashTag('a{x}b')).toBe(true);
  });

  it('find the part of a key Redis Cluster hashes: the first non-empty hash tag, else the whole key', () => {
    expect(slotKeyOf('{idem-wf-abc:steps}:wf-1:lock')).toBe('idem-wf-abc:steps');
    expect(slotKeyOf('bull:steps:wf-1:lock')).toBe('bull:steps:wf-1:lock');
    // Redis's rule: the first '{' and the first '}' after it; an empty tag hashes the whole key
    expect(slotKeyOf('a{}b{c}')).toBe('a{}b{c}');
    expect(slotKeyOf('a{b}{c}')).toBe('b');
    expect(slotKeyOf('a{b')).toBe('a{b');
  });
});
