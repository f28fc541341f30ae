// Drives code-server (real VS Code 1.100 in a browser) with Debian's Chromium via playwright-core, for
// tests/e2e/test_vscode.py. Reads its job from the environment, writes OUT_DIR/result.json with what it
// saw (the pytest side asserts on it) plus screenshots; exits 0 when every step ran, 1 otherwise.
//
//   CS_URL        http://127.0.0.1:PORT/?folder=/abs/workspace
//   OUT_DIR       where result.json, hover.png, find-related.png, failure.png, console.log go
//   FILE          workspace-relative file to open, e.g. model/transformer.py
//   SYMBOL        identifier to hover and to put the cursor in, e.g. RotaryEmbedding
//   SYMBOL_LINE   1-based line of the SYMBOL's definition; SYMBOL_COL 1-based column of its name
//   EXPECT_HOVER  regexp the hover must match before it is read (default: SYMBOL's expected id)
//   EXPECT_PICK   regexp a quick-pick row must match (e.g. exp-0042)
//   CHROMIUM      browser binary (default /usr/bin/chromium)
//   SCENARIO      "tour" (default: every feature with a server at hand) or "install" (no server: the
//                 extension's not-installed message, its install offer accepted, then a code lens)
//                 or "pipe" (soma.server.pipe names a server already listening: a code lens)
const { chromium } = require('playwright-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

const env = process.env;
const URL = env.CS_URL;
const OUT = env.OUT_DIR || 'e2e-out';
const FILE = env.FILE || 'model/transformer.py';
const SYMBOL = env.SYMBOL || 'RotaryEmbedding';
const LINE = Number(env.SYMBOL_LINE || 1);
const COL = Number(env.SYMBOL_COL || 1);
const EXPECT_HOVER = new RegExp(env.EXPECT_HOVER || 'exp-');
const EXPECT_PICK = new RegExp(env.EXPECT_PICK || 'exp-');
const LENS_RE = /related experiment/i;
const SCENARIO = env.SCENARIO || 'tour';
const NOT_INSTALLED = 'soma-lsp is not installed';

const t0 = Date.now();
const log = (...a) => console.log(`[drive ${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
const result = { steps: {}, errors: [] };
const save = () => fs.writeFileSync(path.join(OUT, 'result.json'), JSON.stringify(result, null, 1));

async function step(name, fn) {
  const s = Date.now();
  log('step', name);
  try {
    const value = await fn();
    result.steps[name] = { ok: true, seconds: (Date.now() - s) / 1000, value };
    log('  ok', JSON.stringify(value).slice(0, 300));
    save();
    return value;
  } catch (e) {
    result.steps[name] = { ok: false, seconds: (Date.now() - s) / 1000, error: String(e && e.message || e) };
    result.errors.push(`${name}: ${e && e.message || e}`);
    log('  FAILED', e && e.message);
    save();
    throw e;
  }
}

async function palette(page, text) {
  // F1 opens the command palette with '>' typed; replace the whole input with `text`.
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout: 10000 });
  await input.fill(text);
  return input;
}

/** Run a command from the palette by its title (e.g. 'Soma: Restart Server'). */
async function runCommand(page, title) {
  await palette(page, `>${title}`);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor({ timeout: 15000 });
  await page.keyboard.press('Enter');
}

async function openFile(page) {
  const base = path.posix.basename(FILE);
  // Quick Open by path (needs ripgrep-backed file search); the explorer as a fallback.
  try {
    await palette(page, FILE);
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: base }).first();
    await row.waitFor({ timeout: 15000 });
    await page.keyboard.press('Enter');
  } catch (e) {
    log('  quick open failed, using the explorer:', e.message);
    await page.keyboard.press('Escape');
    for (const part of FILE.split('/')) {
      const r = page.locator('.explorer-folders-view .monaco-list-row', { hasText: part }).first();
      await r.waitFor({ timeout: 30000 });
      await r.click();
    }
  }
  await page.locator('.tabs-container .tab', { hasText: base }).first().waitFor({ timeout: 30000 });
  await page.locator('.monaco-editor .view-lines').first().waitFor({ timeout: 30000 });
  return base;
}

async function tour(page) {
  await step('goto_symbol', async () => {
    // Go to Line/Column puts the cursor inside the symbol's name and scrolls it into view.
    await palette(page, `:${LINE}:${COL}`);
    await page.keyboard.press('Enter');
    const line = page.locator('.monaco-editor .view-line', { hasText: new RegExp(`\\b${SYMBOL}\\b`) }).first();
    await line.waitFor({ timeout: 15000 });
    return (await line.innerText()).trim();
  });

  await step('code_lens', () => visibleLenses(page));

  await step('hover', async () => {
    const tok = page
      .locator('.monaco-editor .view-line', { hasText: new RegExp(`class\\s+${SYMBOL}\\b`) })
      .locator('span span', { hasText: new RegExp(`^${SYMBOL}$`) })
      .first();
    await tok.waitFor({ timeout: 15000 });
    const hover = page.locator('.monaco-hover:not(.hidden) .hover-contents', { hasText: EXPECT_HOVER });
    let lastErr;
    for (let i = 0; i < 8; i++) {
      const box = await tok.boundingBox();
      await page.mouse.move(box.x + 3 + i * 3, box.y + box.height / 2);
      try {
        await hover.first().waitFor({ state: 'visible', timeout: 6000 });
        lastErr = undefined;
        break;
      } catch (e) {
        lastErr = e;
        log('  hover retry', i);
        await page.mouse.move(5, 5);
        await page.waitForTimeout(300);
      }
    }
    if (lastErr) {
      const seen = await page.locator('.monaco-hover').allInnerTexts().catch(() => []);
      throw new Error(`no hover matching ${EXPECT_HOVER} (hovers seen: ${JSON.stringify(seen)})`);
    }
    await page.waitForTimeout(300); // let the markdown finish rendering
    const text = (await page.locator('.monaco-hover:not(.hidden) .hover-contents').allInnerTexts()).join('\n');
    await page.screenshot({ path: path.join(OUT, 'hover.png') });
    await page.mouse.move(5, 5);
    await page.keyboard.press('Escape');
    return text;
  });

  await step('lens_click', async () => {
    // The lens right above `class SYMBOL` runs the client-side `soma.showRelated` command.
    const classLine = page.locator('.monaco-editor .view-line', { hasText: new RegExp(`class\\s+${SYMBOL}\\b`) }).first();
    const lineBox = await classLine.boundingBox();
    const lenses = page.locator('.monaco-editor .codelens-decoration').filter({ hasText: LENS_RE, visible: true });
    let best = null;
    for (const l of await lenses.all()) {
      const b = await l.boundingBox();
      if (b && b.y < lineBox.y && (!best || b.y > best.box.y)) best = { l, box: b };
    }
    if (!best) throw new Error(`no code lens above class ${SYMBOL}`);
    const text = (await best.l.innerText()).trim();
    await best.l.locator('a').first().click();
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: EXPECT_PICK }).first();
    await row.waitFor({ timeout: 30000 });
    const title = await page.locator('.quick-input-widget .quick-input-title').innerText().catch(() => '');
    const count = await page.locator('.quick-input-list .monaco-list-row').count();
    await page.keyboard.press('Escape');
    return { lens: text, title, rows: count };
  });

  await step('status_bar', async () => {
    const item = page.locator('.statusbar-item', { hasText: /Soma/ }).first();
    await item.waitFor({ timeout: 10000 });
    return (await item.innerText()).trim();
  });

  const rows = await step('find_related', async () => {
    // Put the cursor back inside SYMBOL (and the focus in the editor) before running the command.
    await palette(page, `:${LINE}:${COL}`);
    await page.keyboard.press('Enter');
    await runCommand(page, 'Soma: Find Related Experiments');
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: EXPECT_PICK }).first();
    await row.waitFor({ timeout: 30000 });
    await page.waitForTimeout(300);
    const texts = await page.locator('.quick-input-list .monaco-list-row').allInnerTexts();
    const title = await page.locator('.quick-input-widget .quick-input-title').innerText().catch(() => '');
    const placeholder = await page.locator('.quick-input-widget .quick-input-box input').getAttribute('placeholder').catch(() => '');
    await page.screenshot({ path: path.join(OUT, 'find-related.png') });
    return { title, placeholder, rows: texts.map((t) => t.replace(/\s+/g, ' ').trim()) };
  });

  await step('open_record', async () => {
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: EXPECT_PICK }).first();
    await row.click();
    await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10000 });
    const active = page.locator('.tabs-container .tab.active');
    await page.waitForFunction(
      (base) => {
        const t = document.querySelector('.tabs-container .tab.active');
        return t && !t.textContent.includes(base);
      },
      path.posix.basename(FILE),
      { timeout: 15000 },
    );
    return { tab: (await active.innerText()).trim(), rows: rows.rows.length };
  });
  await step('reload_pool', async () => {
    await runCommand(page, 'Soma: Reload Experiment Pool');
    const msg = page.locator('.statusbar-item', { hasText: 'experiment pool reloaded' }).first();
    await msg.waitFor({ timeout: 30000 });
    return (await msg.innerText()).trim();
  });

  await step('restart_server', async () => {
    await runCommand(page, 'Soma: Restart Server');
    await runCommand(page, 'Soma: Show Output');
    // The output channel (virtualised: only the visible lines are in the DOM) shows the Soma log; the
    // pytest side checks the restart in the saved log file.
    const panel = page.locator('.part.panel .monaco-editor .view-lines', { hasText: /\[client|\[Trace|\[Info/ });
    await panel.first().waitFor({ timeout: 15000 });
    // ...and it answers, once it has loaded the pool again (the status bar says so): the same query as
    // before lists the expected record again.
    await page.locator('.statusbar-item', { hasText: /Soma: [1-9]\d* experiments/ })
      .filter({ hasNotText: /indexing/ }).first().waitFor({ timeout: 30000 });
    await page.locator('.tabs-container .tab', { hasText: path.posix.basename(FILE) }).first().click();
    await palette(page, `:${LINE}:${COL}`);
    await page.keyboard.press('Enter');
    await runCommand(page, 'Soma: Find Related Experiments');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: EXPECT_PICK }).first().waitFor({ timeout: 30000 });
    await page.keyboard.press('Escape');
    return (await panel.first().innerText()).split('\n').filter((l) => /\[client/.test(l)).slice(-4);
  });
  await step('settings_change', async () => {
    // Untick "Soma › Code Lens: Enabled" in the Settings editor: the change reaches the server
    // (workspace/didChangeConfiguration) and the lenses go away.
    await palette(page, '>Preferences: Open User Settings');
    const cmd = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Preferences: Open User Settings' })
      .filter({ hasNotText: 'JSON' }).first();
    await cmd.waitFor({ timeout: 10000 });
    await cmd.click();
    const search = page.locator('.settings-editor .suggest-input-container .monaco-editor textarea, .settings-editor .search-container textarea').first();
    await search.waitFor({ timeout: 15000 });
    await search.fill('soma.codeLens.enabled');
    const box = page.locator('.settings-editor .setting-item-bool .setting-value-checkbox').first();
    await box.waitFor({ timeout: 15000 });
    if ((await box.getAttribute('aria-checked')) !== 'true') throw new Error('the setting is not on to begin with');
    await box.click();
    await page.waitForFunction(
      () => document.querySelector('.settings-editor .setting-item-bool .setting-value-checkbox')?.getAttribute('aria-checked') === 'false',
      null, { timeout: 30000 });
    await page.locator('.tabs-container .tab', { hasText: path.posix.basename(FILE) }).first().click();
    const lenses = page.locator('.monaco-editor .codelens-decoration').filter({ hasText: LENS_RE, visible: true });
    const deadline = Date.now() + 30000;
    let n = await lenses.count();
    while (n > 0 && Date.now() < deadline) {
      await page.waitForTimeout(250);
      n = await lenses.count();
    }
    let back = false;
    if (n === 0) {
      // not just a repaint: still none a moment later
      await page.waitForTimeout(2000);
      n = await lenses.count();
      back = n > 0;
    }
    await page.screenshot({ path: path.join(OUT, 'lenses-off.png') });
    if (n > 0) {
      throw new Error(back ? `${n} code lenses gone, then shown again after turning soma.codeLens.enabled off`
        : `${n} code lenses still shown 30 s after turning soma.codeLens.enabled off`);
    }
    return { visibleLenses: n };
  });
}

async function installOffer(page) {
  // No server anywhere: one error message with the fix and the offer (a second start attempt, by
  // "Soma: Restart Server", adds none); accepting it installs the server, which then answers.
  const toast = page.locator('.notifications-toasts .notification-toast', { hasText: NOT_INSTALLED });
  const first = await step('not_installed', async () => {
    await toast.first().waitFor({ timeout: 90000 });
    const text = (await toast.first().locator('.notification-list-item-message').innerText()).trim();
    const buttons = await toast.first().locator('.notification-list-item-buttons-container .monaco-button').allInnerTexts();
    return { text, buttons: buttons.map((b) => b.trim()) };
  });
  await step('said_once', async () => {
    await runCommand(page, 'Soma: Restart Server');
    await page.locator('.statusbar-item', { hasText: /Soma/ }).first().waitFor({ timeout: 10000 });
    await page.waitForTimeout(5000); // the restart's own attempt to find the server is over by then
    return { toasts: await toast.count() };
  });
  await step('install', async () => {
    const button = toast.first().locator('.monaco-button', { hasText: first.buttons.find((b) => /Install/.test(b)) || 'Install' });
    await button.click();
    await page.locator('.statusbar-item', { hasText: /Soma: [1-9]\d* experiments/ })
      .filter({ hasNotText: /indexing/ }).first().waitFor({ timeout: 400000 });
    return (await page.locator('.statusbar-item', { hasText: /Soma/ }).first().innerText()).trim();
  });
  await step('open_file', () => openFile(page));
  await step('code_lens', () => visibleLenses(page));
}

async function visibleLenses(page) {
  // Lenses of lines outside the viewport stay in the DOM, hidden: wait for a visible one.
  const lens = page.locator('.monaco-editor .codelens-decoration').filter({ hasText: LENS_RE, visible: true });
  await lens.first().waitFor({ timeout: 90000 });
  const all = await page.locator('.monaco-editor .codelens-decoration').filter({ visible: true }).allInnerTexts();
  return all.map((t) => t.trim()).filter(Boolean);
}

(async () => {
  fs.mkdirSync(OUT, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'soma-chromium-'));
  let ok = false;
  let ctx;
  let page;
  try {
    await step('browser', async () => {
      ctx = await chromium.launchPersistentContext(profile, {
        executablePath: env.CHROMIUM || '/usr/bin/chromium',
        headless: true,
        viewport: { width: 1400, height: 900 },
        args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
          '--disable-background-networking', '--disable-component-update', '--disable-sync',
          '--disable-dev-shm-usage'],
      });
      page = ctx.pages()[0] || await ctx.newPage();
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning' || /soma/i.test(m.text()))
          fs.appendFileSync(path.join(OUT, 'console.log'), `${m.type()}: ${m.text()}\n`);
      });
      return true;
    });
    await step('workbench', async () => {
      await page.goto(URL);
      await page.locator('.monaco-workbench').waitFor({ timeout: 90000 });
      return true;
    });

    if (SCENARIO === 'install') await installOffer(page);
    else if (SCENARIO === 'pipe') {
      await step('open_file', () => openFile(page));
      await step('code_lens', () => visibleLenses(page));
    } else {
      await step('open_file', () => openFile(page));
      await tour(page);
    }
    ok = true;
  } catch (e) {
    try { if (page) await page.screenshot({ path: path.join(OUT, 'failure.png') }); } catch (_) { /* page gone */ }
  } finally {
    result.ok = ok;
    result.seconds = (Date.now() - t0) / 1000;
    save();
    if (ctx) await ctx.close().catch(() => undefined);
    fs.rmSync(profile, { recursive: true, force: true });
  }
  log('RESULT', ok ? 'PASS' : 'FAIL');
  process.exit(ok ? 0 : 1);
})();
