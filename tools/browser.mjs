// Open pages of the built site in one headless Chromium and write down what each one shows.
//
//   node tools/browser.mjs JOB.json RESULT.json
//
// tools/screenshot_site.py (job.views: a page in a theme at a width, screenshotted) and
// tools/try_page_check.py (job.cases: the "Try the models" page given an input) write the job,
// run this script and judge the result; this script only drives the browser (puppeteer-core,
// with the system Chromium as its executable: no browser is downloaded). One browser serves the
// whole job, each page in a fresh context (its own cache and storage, so that every file the
// page needs is fetched again and counted): launching Chromium once per page took most of the
// time. For every page it records every request, response, failed request, console message and
// page error.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import puppeteer from "puppeteer-core";

const [jobFile, resultFile] = process.argv.slice(2);
if (!resultFile) throw new Error("usage: node tools/browser.mjs JOB.json RESULT.json");
const job = JSON.parse(await readFile(jobFile, "utf8"));
const FINAL = ["done", "input-error", "unavailable"]; // the Try page's settled states
const message = (err) => String(err && err.message ? err.message : err).slice(0, 500);

// A fresh context and page that records what it fetches and says; `spec.theme` is chosen the
// way the pydata theme remembers a reader's choice (localStorage, before the page's scripts).
async function openPage(browser, spec, record) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  Object.assign(record, { requests: [], responses: [], failed: [], console: [], pageErrors: [] });
  page.on("request", (req) => record.requests.push(req.url()));
  page.on("response", (resp) =>
    record.responses.push({ url: resp.url(), status: resp.status(),
                            bytes: Number(resp.headers()["content-length"] || 0) }));
  page.on("requestfailed", (req) =>
    record.failed.push({ url: req.url(), error: req.failure() ? req.failure().errorText : "" }));
  page.on("console", (msg) =>
    record.console.push({ type: msg.type(), text: msg.text(), url: msg.location().url || "" }));
  page.on("pageerror", (err) => record.pageErrors.push(message(err)));
  // a browser without WebAssembly, as far as any script of the page can tell (Chromium
  // ignores V8's --noexpose-wasm: Blink installs the WebAssembly object itself)
  if (spec.noWebAssembly) await page.evaluateOnNewDocument(() => delete globalThis.WebAssembly);
  if (spec.theme) {
    await page.evaluateOnNewDocument((theme) => {
      for (const key of ["theme", "mode"]) localStorage.setItem(key, theme);
    }, spec.theme);
  }
  await page.setViewport({ width: spec.width || 1280, height: spec.height || 900 });
  return { context, page };
}

// -- job.views (tools/screenshot_site.py) ----------------------------------------------------

// What the page shows once MathJax has typeset it (and, on the "Try the models" page, once
// both models have decoded): run inside the page. Every wait shares one deadline.
async function inspect(codeSelector, deadline, final) {
  const out = { images: [], broken: [], math: 0, rendered: 0, merror: 0, mathjax: "absent",
                theme: "", overflow: [], page_width: 0, window_width: 0, late: [] };
  const late = (what) => new Promise((resolve) => setTimeout(() => resolve(out.late.push(what)),
                                                             Math.max(0, deadline - Date.now())));
  const limit = (what, promise) => Promise.race([promise, late(what)]);
  try {
    if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
      out.mathjax = "loaded";
      const typeset = window.MathJax.startup.promise.then(() => "typeset");
      if ((await limit("MathJax", typeset)) === "typeset") out.mathjax = "typeset";
    }
    await limit("fonts", document.fonts.ready);
    // the "Try the models" page (docs/_static/try): its models load and decode after `load`
    if ("tryModels" in window || document.querySelector(".try-model")) {
      await limit("the Try page's models", new Promise((resolve) => {
        const poll = () => (window.tryModels && final.includes(window.tryModels.state)
          ? resolve("ok") : setTimeout(poll, 100));
        poll();
      }));
    }
    out.theme = document.documentElement.dataset.theme || "";
    // every <img>, loaded again by a probe (a lazy image below the fold loads too), at once
    const urls = Array.from(document.images).map((img) => img.currentSrc || img.src);
    const probe = (url) => new Promise((resolve) => {
      const image = new Image();
      image.onload = () => resolve(image.naturalWidth > 0 && image.naturalHeight > 0);
      image.onerror = () => resolve(false);
      image.src = url;
    });
    const loaded = await Promise.all(urls.map((url) => limit(`image ${url}`, probe(url))));
    out.images = urls;
    out.broken = urls.filter((url, i) => loaded[i] !== true);
    out.math = document.querySelectorAll("span.math, div.math").length;
    out.rendered = document.querySelectorAll("mjx-container").length;
    out.merror = document.querySelectorAll("mjx-merror").length;
    for (const pre of Array.from(document.querySelectorAll(codeSelector))) {
      if (pre.scrollWidth > pre.clientWidth + 2) {
        const longest = pre.textContent.split("\n").reduce((a, b) => (b.length > a.length ? b : a));
        const excess = pre.scrollWidth - pre.clientWidth;
        out.overflow.push({ excess, line: longest.slice(0, 100) });
      }
    }
    out.page_width = document.documentElement.scrollWidth;
    out.window_width = window.innerWidth;
  } catch (err) {
    out.error = String(err);
  }
  return out;
}

async function runView(browser, view) {
  const record = {};
  let opened = null;
  try {
    opened = await openPage(browser, view, record);
    const deadline = Date.now() + job.timeout_ms;
    try {
      await opened.page.goto(job.base + view.url, { waitUntil: "load", timeout: job.timeout_ms });
      // what the page fetches after `load` (the Try page's models) is checked too
      await opened.page
        .waitForNetworkIdle({ idleTime: 300, timeout: Math.max(1, deadline - Date.now()) })
        .catch(() => {});
      record.browser = await opened.page.evaluate(inspect, job.code_selector, deadline, FINAL);
    } catch (err) {
      record.driver_error = message(err);
    }
    // a screenshot even when the page did not settle: it shows how far it got
    await opened.page.screenshot({ path: view.shot })
      .catch((err) => { record.screenshot_error = message(err); });
  } catch (err) {
    record.driver_error = record.driver_error || message(err);
  }
  if (opened) await opened.context.close().catch(() => {});
  return record;
}

// -- job.cases (tools/try_page_check.py) -----------------------------------------------------

// Wait until the Try page has settled: a final state, and a different run than `previous`.
async function settle(page, previous) {
  await page.waitForFunction((final, previous) => {
    const api = window.tryModels;
    if (!api || !final.includes(api.state)) return false;
    const src = api.result ? api.result.src.join(",") : "";
    return previous === null || src !== previous || api.state !== "done";
  }, { timeout: job.timeout_ms, polling: 50 }, FINAL, previous);
}

// What the Try page exposes (window.tryModels) and the tokens it shows.
const readPage = (page) => page.evaluate(() => {
  const api = window.tryModels || {};
  const text = (sel) => {
    const node = document.querySelector(sel);
    return node && !node.hidden ? node.textContent.trim() : "";
  };
  const shown = {};
  for (const panel of document.querySelectorAll(".try-model")) {
    shown[panel.id.replace("try-model-", "")] = Array.from(
      panel.querySelectorAll(".try-output .try-token .try-value"), (n) => n.textContent);
  }
  const result = api.result && {
    src: api.result.src,
    models: Object.fromEntries(Object.entries(api.result.models).map(([name, m]) => [name, {
      tokens: m.tokens,
      steps: m.steps.map((s) => ({ token: s.token, top: s.top, attention: s.attention })),
    }])),
  };
  return { state: api.state, message: api.message, error: text("#try-error"),
           unavailable: text("#try-unavailable"), shown, result,
           timeToFirstOutputMs: api.timeToFirstOutputMs,
           pageWidth: document.documentElement.scrollWidth, windowWidth: window.innerWidth };
});

async function runCase(browser, spec) {
  const record = { name: spec.name };
  const { context, page } = await openPage(browser, spec, record);
  await page.setCacheEnabled(false);
  try {
    await page.goto(spec.url, { waitUntil: "load", timeout: job.timeout_ms });
    await settle(page, null);
    record.first = await readPage(page);
    // then, on the loaded page: type into the box, or press a case button
    for (const action of spec.actions || []) {
      const before = await page.evaluate(() =>
        window.tryModels.result ? window.tryModels.result.src.join(",") : "");
      if (action.type) {
        await page.$eval("#try-input", (node) => { node.value = ""; });
        await page.type("#try-input", action.type);
        await page.click("#try-run");
      } else {
        await page.click(`button[data-case="${action.press}"]`);
      }
      await settle(page, before);
      (record.actions = record.actions || []).push(await readPage(page));
    }
    for (const shot of spec.screenshots || []) {
      await page.setViewport({ width: shot.width, height: 900 });
      await page.evaluate((theme) => Object.assign(document.documentElement.dataset,
                                                    { theme, mode: theme }), shot.theme);
      await new Promise((resolve) => setTimeout(resolve, 200));
      await page.screenshot({ path: shot.path, fullPage: true });
      const [pageWidth, windowWidth] = await page.evaluate(() =>
        [document.documentElement.scrollWidth, window.innerWidth]);
      record.screenshots = [...(record.screenshots || []), { path: shot.path, pageWidth,
                                                              windowWidth }];
    }
  } catch (err) {
    record.driverError = message(err);
    record.first = record.first || (await readPage(page).catch(() => undefined));
  }
  await context.close().catch(() => {});
  return record;
}

// -- the job -------------------------------------------------------------------------------

const profile = await mkdtemp(join(tmpdir(), "site-browser-"));
let browser;
try {
  browser = await puppeteer.launch({
    executablePath: job.chromium,
    headless: true,
    args: [...job.chromium_flags, `--user-data-dir=${profile}`],
    // each page's calls stay within its own deadline; this only stops a browser that hangs
    protocolTimeout: job.timeout_ms * 3,
  });
} catch (err) {
  await rm(profile, { recursive: true, force: true });
  console.error(`browser.mjs: Chromium (${job.chromium}) did not start: ${message(err)}`);
  process.exit(3);
}
// SIGTERM from the Python side (its overall limit): close Chromium, keep what is done
let stopping = false;
process.on("SIGTERM", () => (stopping = true));
const results = { chromium: await browser.version(), views: [], cases: [] };
try {
  for (const [list, run] of [[job.views, runView], [job.cases, runCase]]) {
    for (const spec of list || []) {
      if (stopping) break;
      const t0 = Date.now();
      const record = await run(browser, spec);
      results[list === job.views ? "views" : "cases"].push({ ...record, ms: Date.now() - t0 });
      // the result so far, after every page: a run stopped half-way still reports what it saw
      await writeFile(resultFile, JSON.stringify(results, null, 1));
      const how = `${spec.theme || "light"}, ${spec.width || 1280} px`;
      console.log(`  ${((Date.now() - t0) / 1000).toFixed(1)} s  ${spec.url} (${how})`);
    }
  }
} finally {
  await browser.close().catch(() => {});
  await rm(profile, { recursive: true, force: true });
}
await writeFile(resultFile, JSON.stringify(results, null, 1));
