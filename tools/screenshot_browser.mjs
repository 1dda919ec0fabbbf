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

// What the page shows once MathJax has typeset it (and, on the "Try the models" page, once
// both models have decoded): run inside the page. Every wait shares one deadline.
async function inspect(codeSelector, deadline) {
  const out = { images: [], broken: [], math: 0, rendered: 0, merror: 0, mathjax: "absent",
                theme: "", overflow: [], page_width: 0, window_width: 0, late: [] };
  const limit = (what, promise) =>
    Promise.race([
      promise,
      new Promise((resolve) =>
        setTimeout(() => { out.late.push(what); resolve("late"); },
                   Math.max(0, deadline - Date.now())),
      ),
    ]);
  try {
    if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
      out.mathjax = "loaded";
      if ((await limit("MathJax", window.MathJax.startup.promise.then(() => "ok"))) === "ok") {
        out.mathjax = "typeset";
      }
    }
    await limit("fonts", document.fonts.ready);
    // the "Try the models" page (docs/_static/try): its models load and decode after `load`
    if ("tryModels" in window || document.querySelector(".try-model")) {
      await limit("the Try page's models", new Promise((resolve) => {
        const poll = () => {
          const api = window.tryModels;
          if (api && ["done", "input-error", "unavailable"].includes(api.state)) resolve("ok");
          else setTimeout(poll, 100);
        };
        poll();
      }));
    }
    out.theme = document.documentElement.dataset.theme || "";
    // every <img>, loaded again by a probe (a lazy image below the fold loads too), at once
    const urls = Array.from(document.images).map((img) => img.currentSrc || img.src);
    const loaded = await Promise.all(urls.map((url) => limit(`image ${url}`, new Promise((resolve) => {
      const probe = new Image();
      probe.onload = () => resolve(probe.naturalWidth > 0 && probe.naturalHeight > 0);
      probe.onerror = () => resolve(false);
      probe.src = url;
    }))));
    out.images = urls;
    out.broken = urls.filter((url, i) => loaded[i] !== true);
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

const message = (err) => String(err && err.message ? err.message : err).slice(0, 500);

async function runView(browser, view) {
  const record = { requests: [], responses: [], failed: [] };
  const t0 = Date.now();
  let context = null;
  try {
    context = await browser.createBrowserContext();
    const page = await context.newPage();
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
    const deadline = Date.now() + job.timeout_ms;
    try {
      await page.goto(job.base + view.url, { waitUntil: "load", timeout: job.timeout_ms });
      // what the page fetches after `load` (the Try page's models) is checked too
      await page
        .waitForNetworkIdle({ idleTime: 300, timeout: Math.max(1, deadline - Date.now()) })
        .catch(() => {});
      record.browser = await page.evaluate(inspect, job.code_selector, deadline);
    } catch (err) {
      record.driver_error = message(err);
    }
    // a screenshot even when the page did not settle: it shows how far it got
    try {
      await page.screenshot({ path: view.shot });
    } catch (err) {
      record.screenshot_error = message(err);
    }
  } catch (err) {
    record.driver_error = record.driver_error || message(err);
  } finally {
    record.ms = Date.now() - t0;
    if (context) await context.close().catch(() => {});
  }
  return record;
}

const profile = await mkdtemp(join(tmpdir(), "screenshot-site-"));
let browser;
try {
  browser = await puppeteer.launch({
    executablePath: job.chromium,
    headless: true,
    args: [...job.chromium_flags, `--user-data-dir=${profile}`],
    // one view's calls stay within its own deadline; this only stops a browser that hangs
    protocolTimeout: job.timeout_ms * 3,
  });
} catch (err) {
  await rm(profile, { recursive: true, force: true });
  console.error(`screenshot_browser: Chromium (${job.chromium}) did not start: ${message(err)}`);
  process.exit(3);
}
// SIGTERM from tools/screenshot_site.py (its overall limit): close Chromium, keep what is done
let stopping = false;
process.on("SIGTERM", () => {
  stopping = true;
});
const results = { chromium: await browser.version(), views: [] };
try {
  for (const view of job.views) {
    if (stopping) break;
    const record = await runView(browser, view);
    results.views.push(record);
    // the result so far, after every view: a run stopped half-way still reports what it saw
    await writeFile(resultFile, JSON.stringify(results, null, 1));
    console.log(`  ${(record.ms / 1000).toFixed(1)} s  ${view.url} (${view.theme}, ${view.width} px)`);
  }
} finally {
  await browser.close().catch(() => {});
  await rm(profile, { recursive: true, force: true });
}
await writeFile(resultFile, JSON.stringify(results, null, 1));
