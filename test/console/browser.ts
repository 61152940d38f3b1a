import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Browser } from 'puppeteer-core';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

/** Debian's `chromium` package, installed with apt-get on first use (as the test setup does for redis-server); no browser download. */
export function chromiumPath(): string {
  const found = CANDIDATES.find((p) => existsSync(p));
  if (found) return found;
  execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  const installed = CANDIDATES.find((p) => existsSync(p));
  if (!installed) throw new Error('apt-get installed chromium but no chromium binary was found');
  return installed;
}

/** Headless Chromium driven by puppeteer-core. */
export async function launchBrowser(): Promise<Browser> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const puppeteer = require('puppeteer-core') as typeof import('puppeteer-core');
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run'],
  });
}
