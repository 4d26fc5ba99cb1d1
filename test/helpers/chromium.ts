/**
 * Debian's Chromium for Playwright (`apt-get install chromium`; Playwright cannot download a
 * browser here): where it is, and how to start it on this machine's closed network. No
 * node:test here, so a benchmark can use it too.
 */
import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (p) => p !== undefined && p !== '' && fs.existsSync(p),
);

/** Headless, and no background requests to Google's hosts (refused here, many at a time). */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export function launchChromium(): Promise<Browser> {
  if (!CHROMIUM) throw new Error('no Chromium found (apt-get install chromium, or set CHROMIUM_PATH)');
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
}
