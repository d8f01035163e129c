// Opens Kith's GraphiQL in headless Chromium with every request outside the
// server refused (as on a machine without internet access); checks that the
// docs explorer lists `User`'s fields and that typing `{ viewer { fol` offers
// `followers` and `following` (both need the schema GraphiQL introspects);
// runs a query through the UI with a bearer token in the Headers tab, and
// checks that the result pane shows the answer:
//   node tests/http-audit/graphiql.mjs <base url> <token> <expected handle> <screenshot path>
// Exits 0 when the answer shows, 1 otherwise (with what the page showed).
import { chromium } from 'playwright-core';

const [base, token, handle, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error('usage: node graphiql.mjs <base url> <token> <expected handle> <screenshot path>');
  process.exit(2);
}
const origin = new URL(base).origin;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
let failed = false;
try {
  const page = await browser.newPage();
  const outside = [];
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith('data:')) return route.continue();
    outside.push(url);
    return route.abort();
  });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));

  await page.goto(`${base}/graphql`);
  await page.waitForSelector('.graphiql-query-editor .CodeMirror', { timeout: 20_000 });
  const setEditor = (selector, text) =>
    page.evaluate(
      ([selector, text]) => document.querySelector(selector).CodeMirror.setValue(text),
      [selector, text],
    );
  // The docs explorer, from the introspected schema: User's fields.
  await page.click('.graphiql-sidebar button[aria-label="Show Documentation Explorer"]');
  const docs = page.locator('.graphiql-doc-explorer');
  try {
    await docs.locator('a.graphiql-doc-explorer-type-name', { hasText: /^User$/ }).click({ timeout: 20_000 });
    await docs.getByText('relationTo(').waitFor({ timeout: 10_000 });
    const text = await docs.innerText();
    const missing = ['counters', 'followers(', 'following(', 'viewerRelation'].filter((f) => !text.includes(f));
    if (missing.length) throw new Error(`missing ${missing.join(', ')}`);
    console.log("ok: the docs explorer lists User's fields");
  } catch (e) {
    failed = true;
    console.log(`FAIL: the docs explorer: ${e.message}; it shows ${JSON.stringify(await docs.innerText())}`);
  }
  // Autocompletion, from the same schema.
  await setEditor('.graphiql-query-editor .CodeMirror', '');
  await page.click('.graphiql-query-editor .CodeMirror');
  await page.keyboard.type('{ viewer { fol');
  try {
    await page.waitForSelector('.CodeMirror-hints', { timeout: 10_000 });
    const offered = await page.$$eval('.CodeMirror-hints li', (items) => items.map((i) => i.innerText));
    if (!offered.includes('followers') || !offered.includes('following')) {
      throw new Error(`offered ${JSON.stringify(offered)}`);
    }
    console.log(`ok: typing "{ viewer { fol" offers ${offered.join(', ')}`);
  } catch (e) {
    failed = true;
    console.log(`FAIL: autocompletion: ${e.message}`);
  }
  await page.keyboard.press('Escape');

  await setEditor('.graphiql-query-editor .CodeMirror', '{ viewer { handle } }');
  await page.click('.graphiql-editor-tools button[data-name="headers"]');
  await page.waitForSelector('.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror');
  await setEditor(
    '.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror',
    JSON.stringify({ Authorization: `Bearer ${token}` }),
  );
  await page.click('.graphiql-execute-button');
  const result = page.locator('.result-window');
  try {
    await result.filter({ hasText: `"handle": "${handle}"` }).waitFor({ timeout: 20_000 });
    console.log(`ok: the result pane shows ${handle}`);
  } catch (e) {
    failed = true;
    console.log(`FAIL: the result pane shows ${JSON.stringify(await result.innerText())}`);
  }
  await page.screenshot({ path: screenshot });
  if (outside.length) {
    failed = true;
    console.log(`FAIL: the page asked for resources outside the server: ${outside.join(', ')}`);
  }
  if (errors.length) {
    failed = true;
    console.log(`FAIL: page errors: ${errors.join('; ')}`);
  }
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
