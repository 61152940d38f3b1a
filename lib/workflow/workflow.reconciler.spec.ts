import { reconcilerLeaseMs } from './workflow.reconciler';

describe('reconcilerLeaseMs', () => {
  it('is two intervals, at least 10 s and at most 60 s', () => {
    expect(reconcilerLeaseMs(500)).toBe(10_000);
    expect(reconcilerLeaseMs(12_000)).toBe(24_000);
    expect(reconcilerLeaseMs(30_000)).toBe(60_000); // the default interval keeps the lease it always had
    expect(reconcilerLeaseMs(600_000)).toBe(60_000);
  });
});
