// Drive Debian's Chromium through the "Try the models" page and write down what it shows.
//
//   node tools/try_page_browser.mjs JOB.json RESULT.json
//
// tools/try_page_check.py writes the job (the server's address, the cases, where to put the
// screenshots), runs this script, and checks the result against PyTorch; this script only
// drives the browser (puppeteer-core, with the system Chromium as its executable: no browser
// is downloaded) and records, for every case, what the page exposes (window.tryModels), the
// tokens the page shows, every console message, page error, failed request and response.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import puppeteer from "puppeteer-core";

const [jobFile, resultFile] = process.argv.slice(2);
if (!jobFile || !resultFile) {
  console.error("usage: node tools/try_page_browser.mjs JOB.json RESULT.json");
  process.exit(2);
}
const job = JSON.parse(await readFile(jobFile, "utf8"));

// tools/screenshot_site.py's flags, sent in the job by tools/try_page_check.py: no other
// host resolves, nothing phones home
const FLAGS = job.chromium_flags;
const FINAL = ["done", "input-error", "unavailable"];

async function launch(extra) {
  const profile = await mkdtemp(join(tmpdir(), "try-page-"));
  const browser = await puppeteer.launch({
    executablePath: job.chromium,
    headless: true,
    args: [...FLAGS, ...extra, `--user-data-dir=${profile}`],
    // the test's own limit is the one that counts (tools/try_page_check.py)
    protocolTimeout: job.timeout_ms,
  });
  return { browser, profile };
}

// Wait until the page has settled: a final state, and a different run than `previous`.
async function settle(page, previous) {
  await page.waitForFunction(
    (final, previous) => {
      const api = window.tryModels;
      if (!api || !final.includes(api.state)) return false;
      const src = api.result ? api.result.src.join(",") : "";
      return previous === null || src !== previous || api.state !== "done";
    },
    { timeout: job.timeout_ms, polling: 50 },
    FINAL,
    previous,
  );
}

async function readPage(page) {
  return page.evaluate(() => {
    const api = window.tryModels || {};
    const text = (sel) => {
      const node = document.querySelector(sel);
      return node && !node.hidden ? node.textContent.trim() : "";
    };
    const shown = {};
    for (const panel of document.querySelectorAll(".try-model")) {
      const name = panel.id.replace("try-model-", "");
      shown[name] = Array.from(panel.querySelectorAll(".try-output .try-token .try-value")).map(
        (n) => n.textContent,
      );
    }
    const result = api.result && {
      src: api.result.src,
      sorted: api.result.sorted,
      models: Object.fromEntries(
        Object.entries(api.result.models).map(([name, m]) => [
          name,
          {
            tokens: m.tokens,
            done: m.done,
            steps: m.steps.map((s) => ({ token: s.token, top: s.top, attention: s.attention })),
          },
        ]),
      ),
    };
    return {
      state: api.state,
      message: api.message,
      error: text("#try-error"),
      unavailable: text("#try-unavailable"),
      share: text("#try-share"),
      url: location.href,
      shown,
      result,
      timeToFirstOutputMs: api.timeToFirstOutputMs,
      fetched: api.fetched,
      pageWidth: document.documentElement.scrollWidth,
      windowWidth: window.innerWidth,
    };
  });
}

async function runCase(browser, spec) {
  const context = await browser.createBrowserContext(); // a fresh cache and storage
  const page = await context.newPage();
  await page.setCacheEnabled(false);
  const record = { name: spec.name, console: [], pageErrors: [], failed: [], responses: [] };
  page.on("console", (msg) =>
    record.console.push({ type: msg.type(), text: msg.text(), url: msg.location().url || "" }),
  );
  page.on("pageerror", (err) =>
    record.pageErrors.push(String(err && err.message ? err.message : err)),
  );
  page.on("requestfailed", (req) =>
    record.failed.push({ url: req.url(), error: req.failure() ? req.failure().errorText : "" }),
  );
  page.on("response", (resp) =>
    record.responses.push({
      url: resp.url(),
      status: resp.status(),
      bytes: Number(resp.headers()["content-length"] || 0),
    }),
  );
  if (spec.noWebAssembly) {
    // a browser without WebAssembly, as far as any script of the page can tell (Chromium
    // ignores V8's --noexpose-wasm: Blink installs the WebAssembly object itself)
    await page.evaluateOnNewDocument(() => {
      delete globalThis.WebAssembly;
    });
  }
  if (spec.theme) {
    await page.evaluateOnNewDocument((theme) => {
      localStorage.setItem("theme", theme);
      localStorage.setItem("mode", theme);
    }, spec.theme);
  }
  await page.setViewport({ width: spec.width || 1280, height: spec.height || 900 });
  const t0 = Date.now();
  try {
    await page.goto(spec.url, { waitUntil: "load", timeout: job.timeout_ms });
    await settle(page, null);
    record.wallMs = Date.now() - t0;
    record.first = await readPage(page);
    // then, on the loaded page: type into the box, or press a case button
    for (const action of spec.actions || []) {
      const before = await page.evaluate(() =>
        window.tryModels.result ? window.tryModels.result.src.join(",") : "",
      );
      if (action.type) {
        await page.$eval("#try-input", (node) => (node.value = ""));
        await page.type("#try-input", action.type);
        await page.click("#try-run");
      } else if (action.press) {
        await page.click(`button[data-case="${action.press}"]`);
      }
      await settle(page, before);
      record.actions = record.actions || [];
      record.actions.push(await readPage(page));
    }
    for (const shot of spec.screenshots || []) {
      await page.setViewport({ width: shot.width, height: shot.height || 900 });
      if (shot.theme) {
        await page.evaluate((theme) => {
          document.documentElement.dataset.theme = theme;
          document.documentElement.dataset.mode = theme;
        }, shot.theme);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      await page.screenshot({ path: shot.path, fullPage: true });
      const widths = await page.evaluate(() => [
        document.documentElement.scrollWidth,
        window.innerWidth,
      ]);
      record.screenshots = record.screenshots || [];
      record.screenshots.push({ path: shot.path, pageWidth: widths[0], windowWidth: widths[1] });
    }
  } catch (err) {
    record.driverError = String(err && err.message ? err.message : err);
    try {
      record.first = record.first || (await readPage(page));
    } catch {
      // the page is gone: the driver error says why
    }
  }
  await context.close();
  return record;
}

const results = { chromium: null, cases: [] };
for (const group of job.browsers) {
  const { browser, profile } = await launch(group.flags || []);
  results.chromium = await browser.version();
  try {
    for (const spec of group.cases) results.cases.push(await runCase(browser, spec));
  } finally {
    await browser.close();
    await rm(profile, { recursive: true, force: true });
  }
}
await writeFile(resultFile, JSON.stringify(results, null, 1));
