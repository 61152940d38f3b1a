import { uuidv7 } from './uuidv7';

describe('uuidv7', () => {
  it('has version 7, variant 10, and the time in its first 48 bits', () => {
    const now = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    const id = uuidv7(now);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(now);
  });

  it('is unique and sorts by creation time', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => uuidv7(1_700_000_000_000 + i));
    expect(new Set(ids).size).toBe(1000);
    expect([...ids].sort()).toEqual(ids);
  });
});
