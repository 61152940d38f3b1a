/**
 * Unknown-key detection for option objects. Validation reads each option through a tracked view of its object
 * (`o.ttl`, `'dataSource' in o`, `Object.entries(o)`); every key it read is a known option, every other key of
 * the object is reported. So an option becomes known by being validated: there is no separate list to keep.
 */
export class KeyTracker {
  private readonly sections: { path: string; raw: object; read: Set<string>; hint?: string }[] = [];

  /** The same object seen through a view that records the keys read; non-objects come back unchanged. */
  track<T>(path: string, value: T, hint?: string): T {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
    const read = new Set<string>();
    this.sections.push({ path, raw: value, read, hint });
    const note = (prop: string | symbol) => {
      if (typeof prop === 'string') read.add(prop);
    };
    return new Proxy(value, {
      get: (target, prop, receiver) => (note(prop), Reflect.get(target, prop, receiver) as unknown),
      has: (target, prop) => (note(prop), Reflect.has(target, prop)),
      getOwnPropertyDescriptor: (target, prop) => (note(prop), Reflect.getOwnPropertyDescriptor(target, prop)),
    });
  }

  /** One problem per key that validation never read: `path.key: unknown option; did you mean path.known?`. */
  unknownKeys(): { option: string; message: string }[] {
    const problems: { option: string; message: string }[] = [];
    for (const { path, raw, read, hint } of this.sections) {
      const known = [...read].filter((k) => k !== 'constructor');
      for (const key of Object.keys(raw)) {
        if (read.has(key)) continue;
        const option = path ? `${path}.${key}` : key;
        const guess = nearestKey(key, known);
        const suggestion = guess === undefined ? '' : `did you mean ${path ? `${path}.${guess}` : guess}? `;
        problems.push({ option, message: `unknown option; ${suggestion}(the options${path ? ` of ${path}` : ''} are ${known.join(', ')})${hint ? `; ${hint}` : ''}` });
      }
    }
    return problems;
  }
}

/** The known key a mistyped one most likely meant (a small edit away, or containing it), if any. */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const c = candidate.toLowerCase();
    const contains = Math.min(k.length, c.length) >= 3 && (c.includes(k) || k.includes(c));
    const distance = contains ? Math.min(1, editDistance(k, c)) : editDistance(k, c);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 3)) ? best : undefined;
}

/** Levenshtein distance. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}
