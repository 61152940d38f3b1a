/** `Class.method` of a method decorator's target, or `Class` of a class decorator's: where an option error points. */
export function decoratedName(target: object, key?: string | symbol): string {
  if (key === undefined) return (target as { name?: string }).name ?? 'anonymous class';
  return `${(target as { constructor?: { name?: string } }).constructor?.name ?? 'anonymous class'}.${String(key)}`;
}
