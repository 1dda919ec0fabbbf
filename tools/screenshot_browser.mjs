// Open pages of the built site in one headless Chromium and write down what each view shows.
//
//   node tools/screenshot_browser.mjs JOB.json RESULT.json
//
// tools/screenshot_site.py writes the job (the server's address, the views: page, theme, width,
// height, where the screenshot goes), runs this script and judges the result; this script only
// drives the browser (puppeteer-core, with the system Chromium as its executable: no browser
// is downloaded). One browser serves every view, each view in a fresh context (its own cache
// and storage, so that every file the page needs is fetched again and counted): launching
// Chromium once per view, as the command line's --screenshot does, took most of the time.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import puppeteer from "puppeteer-core";

const [jobFile, resultFile] = process.argv.slice(2);
if (!jobFile || !resultFile) {
  console.error("usage: node tools/screenshot_browser.mjs JOB.json RESULT.json");
  process.exit(2);
}
const job = JSON.parse(await readFile(jobFile, "utf8"));

// What the page shows once MathJax has typeset it: run inside the page.
async function inspect(codeSelector, waitMs) {
  const out = { images: [], broken: [], math: 0, rendered: 0, merror: 0, mathjax: "absent",
                theme: "", overflow: [], page_width: 0, window_width: 0 };
  const limit = (promise) =>
    Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve("late"), waitMs))]);
  try {
    if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
      out.mathjax = "loaded";
      if ((await limit(window.MathJax.startup.promise.then(() => "ok"))) === "ok") {
        out.mathjax = "typeset";
      }
    }
    await limit(document.fonts.ready);
    out.theme = document.documentElement.dataset.theme || "";
    // every <img>, loaded again by a probe (a lazy image below the fold loads too)
    for (const img of Array.from(document.images)) {
      const url = img.currentSrc || img.src;
      const ok = await limit(new Promise((resolve) => {
        const probe = new Image();
        probe.onload = () => resolve(probe.naturalWidth > 0 && probe.naturalHeight > 0);
        probe.onerror = () => resolve(false);
        probe.src = url;
      }));
      out.images.push(url);
      if (ok !== true) out.broken.push(url);
    }
    out.math = document.querySelectorAll("span.math, div.math").length;
    out.rendered = document.querySelectorAll("mjx-container").length;
    out.merror = document.querySelectorAll("mjx-merror").length;
    for (const pre of Array.from(document.querySelectorAll(codeSelector))) {
      if (pre.scrollWidth > pre.clientWidth + 2) {
        const lines = pre.textContent.split("\n");
        const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
        out.overflow.push({ excess: pre.scrollWidth - pre.clientWidth,
                            line: longest.slice(0, 100) });
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
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  const record = { requests: [], responses: [], failed: [], console_errors: [] };
  page.on("request", (req) => record.requests.push(req.url()));
  page.on("response", (resp) => record.responses.push([resp.url(), resp.status()]));
  page.on("requestfailed", (req) =>
    record.failed.push([req.url(), req.failure() ? req.failure().errorText : ""]),
  );
  // the theme is chosen the way the pydata theme remembers a reader's choice
  await page.evaluateOnNewDocument((theme) => {
    localStorage.setItem("theme", theme);
    localStorage.setItem("mode", theme);
  }, view.theme);
  await page.setViewport({ width: view.width, height: view.height });
  const t0 = Date.now();
  try {
    await page.goto(job.base + view.url, { waitUntil: "load", timeout: job.timeout_ms });
    record.browser = await page.evaluate(inspect, job.code_selector, job.timeout_ms);
    await page.screenshot({ path: view.shot });
  } catch (err) {
    record.driver_error = String(err && err.message ? err.message : err);
  }
  record.ms = Date.now() - t0;
  await context.close();
  return record;
}

const profile = await mkdtemp(join(tmpdir(), "screenshot-site-"));
const browser = await puppeteer.launch({
  executablePath: job.chromium,
  headless: true,
  args: [...job.chromium_flags, `--user-data-dir=${profile}`],
  protocolTimeout: job.timeout_ms * 2,
});
const results = { chromium: await browser.version(), views: [] };
try {
  for (const view of job.views) {
    const record = await runView(browser, view);
    results.views.push(record);
    // one line per view as it finishes (the Python side prints its verdicts at the end)
    console.log(`  ${(record.ms / 1000).toFixed(1)} s  ${view.url} (${view.theme}, ${view.width} px)`);
  }
} finally {
  await browser.close();
  await rm(profile, { recursive: true, force: true });
}
await writeFile(resultFile, JSON.stringify(results, null, 1));
