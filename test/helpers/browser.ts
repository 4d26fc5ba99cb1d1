/**
 * Browser tests: Playwright driving Debian's Chromium (`apt-get install chromium`; no browser
 * download). Where no Chromium exists the tests skip with `BROWSER_SKIP` as their reason.
 * Screenshots are written to docs/console/ when SCREENSHOTS=1 (the docs use them).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { inflateSync } from 'node:zlib';
import { after } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import AxeBuilder from '@axe-core/playwright';
import type { Tenant, TestApp } from './app.ts';
import { CHROMIUM, launchChromium } from './chromium.ts';

export { CHROMIUM };

/** `skip` option of a browser test: false when Chromium exists, else why the test does not run. */
export const BROWSER_SKIP: string | false = CHROMIUM ? false : 'no Chromium found (apt-get install chromium, or set CHROMIUM_PATH): browser tests skipped';

let shared: Promise<Browser> | undefined;
after(async () => (await shared)?.close());

/** One Chromium per test file, closed after it. */
export function browser(): Promise<Browser> {
  if (!CHROMIUM) throw new Error(String(BROWSER_SKIP));
  if (!shared) {
    shared = launchChromium();
  }
  return shared;
}

/** A new page (its own context: no storage shared with another test) at the console's sign-in form. */
export async function openConsole(t: TestApp, opts: { bypassCSP?: boolean } = {}): Promise<Page> {
  const context = await (await browser()).newContext({ viewport: { width: 1280, height: 860 }, bypassCSP: opts.bypassCSP ?? false });
  const page = await context.newPage();
  // A script error in the console fails the test that caused it.
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // An answer's status is each test's to judge; any other console error is a fault.
  page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && errors.push(m.text()));
  after(() => assert.deepEqual(errors, [], `errors in the page: ${errors.join('; ')}`));
  await page.goto(`${t.url}/console`);
  return page;
}

/** Signs in with the tenant's client credentials and waits for the workspace to show. */
export async function signIn(page: Page, tenant: Pick<Tenant, 'clientId' | 'clientSecret'>): Promise<void> {
  await page.getByLabel('Client id').fill(tenant.clientId);
  await page.getByLabel('Client secret').fill(tenant.clientSecret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('workspace-name').waitFor();
}

export async function consoleAs(t: TestApp, tenant: Pick<Tenant, 'clientId' | 'clientSecret'>): Promise<Page> {
  const page = await openConsole(t);
  await signIn(page, tenant);
  return page;
}

/**
 * axe-core on the page as it is now: fails on any serious or critical violation, naming the
 * rule and the elements. Axe runs through the DevTools protocol, which the page's CSP allows.
 */
export async function assertAccessible(page: Page, where: string): Promise<void> {
  const result = await new AxeBuilder({ page }).analyze();
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(
    bad.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
    [],
    `accessibility of ${where}`,
  );
}

const SHOTS = path.resolve(import.meta.dirname, '..', '..', 'docs', 'console');

/** A screenshot for the docs (written only when SCREENSHOTS=1); returns the PNG either way. */
export async function screenshot(page: Page, name: string, opts: { selector?: string } = {}): Promise<Buffer> {
  const png = opts.selector ? await page.locator(opts.selector).screenshot() : await page.screenshot({ fullPage: false });
  if (process.env.SCREENSHOTS === '1') {
    fs.mkdirSync(SHOTS, { recursive: true });
    fs.writeFileSync(path.join(SHOTS, `${name}.png`), png);
  }
  return png;
}

/**
 * Whether a PNG shows something: its filtered pixel bytes take many values. A blank (one
 * colour) image takes a handful whatever the filter; a chart with lines and text takes dozens.
 */
export function distinctPngBytes(png: Buffer): number {
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length;) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  return new Set(inflateSync(Buffer.concat(idat))).size;
}

/** Every key the page keeps in localStorage and sessionStorage (the console keeps none). */
export async function storedKeys(page: Page): Promise<string[]> {
  return page.evaluate(() => [...Object.keys(localStorage), ...Object.keys(sessionStorage)]);
}
