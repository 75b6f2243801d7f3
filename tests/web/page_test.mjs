// SPDX-License-Identifier: MIT
// page_test.mjs: opens the bridge's built-in page in headless Chromium (Debian's, driven by
// playwright-core) and reports what it shows. Driven by tests/python/test_foxglove_page.py:
//
//   node page_test.mjs URL OUT_DIR
//
// 1. opens URL, waits until the page is connected, screenshots it (OUT_DIR/empty.png) and
//    prints the line "EMPTY" (the test starts stepping the simulation then);
// 2. waits until the page has drawn 5 clouds and measured a cloud rate, screenshots it
//    (OUT_DIR/cloud.png), and prints one JSON line: the page's counters (window.sensimView)
//    and the console errors.
import { chromium } from 'playwright-core';

const [url, out] = process.argv.slice(2);
if (!url || !out) {
  console.error('usage: node page_test.mjs URL OUT_DIR');
  process.exit(2);
}
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
               '--disable-background-networking', '--disable-component-update',
               '--disable-sync', '--enable-unsafe-swiftshader'];

// Wait until predicate returns something truthy in the page, and return that (as JSON).
async function until(page, predicate, what, seconds) {
  try {
    const got = await page.waitForFunction(predicate, null,
                                           { timeout: seconds * 1000, polling: 100 });
    return await got.jsonValue();
  } catch (err) {
    const stats = await page.evaluate(() => window.sensimView);
    throw new Error(`page: ${what} within ${seconds} s: ${JSON.stringify(stats)}`);
  }
}

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
try {
  const page = await browser.newPage({ viewport: { width: 960, height: 640 } });
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await until(page, () => window.sensimView && window.sensimView.connected, 'connected', 30);
  await page.waitForTimeout(300);
  await page.screenshot({ path: `${out}/empty.png` });
  console.log('EMPTY');
  // the counters and the rate shown, read in the turn of the page that met the condition: the
  // rate falls back to 0 once no cloud has come for its window (a slow machine, a screenshot
  // later)
  const { stats, fpsText } = await until(page, () => {
    const v = window.sensimView;
    return v.clouds >= 5 && v.cloudRate > 0 &&
      { stats: { ...v }, fpsText: document.getElementById('fps').textContent };
  }, 'drew 5 clouds', 60);
  await page.screenshot({ path: `${out}/cloud.png` });
  console.log(JSON.stringify({ stats, fpsText, errors }));
} finally {
  await browser.close();
}
