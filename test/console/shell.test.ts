/**
 * The console's frame: served at /console with a strict CSP and no framing, within its
 * JavaScript budget; sign-in with client credentials (a wrong secret is said plainly), the
 * workspace shown, no secret rendered or stored; CONSOLE=false turns it off.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, describe, it } from 'node:test';
import { appWithTenant, startApp } from '../helpers/app.ts';
import { BROWSER_SKIP, assertAccessible, consoleAs, openConsole, screenshot, signIn, storedKeys } from '../helpers/browser.ts';
import { CONSOLE_DIST } from '../../src/console/surface.ts';

const { t, tenant } = await appWithTenant();

/** The built index.html and the JavaScript and CSS files it names. */
function built(): { html: string; js: string; css: string } {
  const indexFile = path.join(CONSOLE_DIST, 'index.html');
  assert.ok(fs.existsSync(indexFile), 'the console is not built: npm install (or npm run build:console) builds it');
  const html = fs.readFileSync(indexFile, 'utf8');
  const js = /src="\/console\/assets\/([^"]+\.js)"/.exec(html)?.[1];
  const css = /href="\/console\/assets\/([^"]+\.css)"/.exec(html)?.[1];
  assert.ok(js && css, html);
  return { html, js, css };
}

describe('serving', () => {
  it('answers /console with the page, a strict CSP, no framing and no inline script', async () => {
    const res = await fetch(`${t.url}/console`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const html = await res.text();
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) assert.match(tag, /\bsrc="/, `inline script: ${tag}`);
    assert.equal((await fetch(`${t.url}/console/`)).status, 200);
  });

  it('serves hashed assets for a year, gzipped when asked, and 404 for any other name', async () => {
    const { js, css } = built();
    const a = await fetch(`${t.url}/console/assets/${js}`, { headers: { 'accept-encoding': 'gzip' } });
    assert.equal(a.status, 200);
    assert.match(a.headers.get('cache-control') ?? '', /immutable/);
    assert.equal(a.headers.get('content-encoding'), 'gzip');
    assert.match(a.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.ok((await a.text()).length > 1000);
    assert.equal((await fetch(`${t.url}/console/assets/${css}`)).status, 200);
    const missing = await fetch(`${t.url}/console/assets/nothing-here.js`);
    assert.equal(missing.status, 404);
    assert.ok(missing.headers.get('content-security-policy'));
    assert.equal((await fetch(`${t.url}/console/assets/..%2F..%2Fpackage.json`)).status, 404);
  });

  it('keeps the initial JavaScript within 150 KB gzipped', () => {
    const { js } = built();
    const gz = gzipSync(fs.readFileSync(path.join(CONSOLE_DIST, 'assets', js))).length;
    assert.ok(gz <= 150 * 1024, `${js} is ${gz} bytes gzipped`);
  });

  it('is off with CONSOLE=false', async () => {
    const off = await startApp({ CONSOLE: 'false' });
    after(() => off.close());
    assert.equal((await fetch(`${off.url}/console`)).status, 404);
    assert.equal((await fetch(`${off.url}/healthz`)).status, 200);
  });
});

describe('sign-in', { skip: BROWSER_SKIP }, () => {
  it('says plainly when the credentials are wrong, and keeps the form', async () => {
    const page = await openConsole(t);
    await assertAccessible(page, 'the sign-in form');
    await page.getByLabel('Client id').fill(tenant.clientId);
    await page.getByLabel('Client secret').fill('not-the-secret');
    // By keyboard: Enter in the last field submits.
    await page.getByLabel('Client secret').press('Enter');
    const alert = page.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /Could not sign in/);
    assert.match(await alert.innerText(), /invalid_client/);
    await screenshot(page, 'sign-in-refused');
    assert.equal(await page.getByLabel('Client id').inputValue(), tenant.clientId);
  });

  it('shows the workspace; no secret in the page, the address or storage', async () => {
    const page = await consoleAs(t, tenant);
    assert.equal(await page.getByTestId('workspace-name').innerText(), 'Main');
    const html = await page.content();
    assert.ok(!html.includes(tenant.clientSecret), 'the secret is rendered');
    assert.ok(!page.url().includes(tenant.clientSecret) && !/token/i.test(page.url()), page.url());
    assert.deepEqual(await storedKeys(page), []);
    await assertAccessible(page, 'the signed-in shell');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Client id').waitFor();
    await signIn(page, tenant);
  });
});
