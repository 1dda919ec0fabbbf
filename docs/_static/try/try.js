/* "Try the models": both trained models sort the reader's sequence in the browser.
 *
 * Plain JavaScript, no framework. The models were exported to ONNX by
 * tools/export_onnx.py, which also wrote models.json (the vocabulary, the size of the
 * position table, the graphs' file names) and copied the onnxruntime-web files into
 * _static/try/ort/. Nothing leaves the reader's machine: onnxruntime-web runs the graphs
 * in WebAssembly, on one thread (a static site has no cross-origin isolation headers, so
 * the threaded runtime cannot share memory between workers).
 *
 * Decoding is greedy, as in convs2s_edu.greedy_decode: at every step the most probable
 * next token, never PAD or <sos>, until <eos> or the step limit (the source length + 1,
 * capped at the position table).
 *
 *   ConvS2S: one graph, (src (1, S), prefix (1, T)) -> log p(next) (1, V), attention of
 *            every decoder layer for the newest position (1, L, S). The decoder reads the
 *            whole prefix at every step, like greedy_decode(..., incremental=False).
 *   GRU:     an encoder graph, src -> annotations h, keys W_a h_j + b_a, s_0 (Decoder.start), and
 *            a one-step graph, (y_prev, h, keys, s) -> log p(next), attention (1, 1, S), s_t
 *            (Decoder.step): the recurrent state is carried from step to step.
 *
 * The page never writes to the console: every failure (no WebAssembly, a file:// address,
 * a missing file, bad input) becomes a message in the page. tools/try_page_check.py reads
 * the results from the page (window.tryModels and the DOM) and fails on any console error.
 */
(function () {
  "use strict";

  // Where this script lives: the models and the runtime lie next to it.
  const SCRIPT_URL = document.currentScript ? document.currentScript.src : "";
  const ASSETS = new URL(".", SCRIPT_URL || document.baseURI);
  const ORT_DIR = new URL("ort/", ASSETS);
  const STEP_DELAY_MS = 30; // a short pause between steps, so that the reader sees the output grow

  // What the page exposes to its browser test (and to a curious reader's console).
  const api = {
    state: "starting", // starting | idle | loading | running | done | input-error | unavailable
    message: "",
    result: null, // the last decoding: see decodeBoth()
    fetched: {}, // URL -> bytes, for every model and runtime file this page fetched
    timeToFirstOutputMs: null, // from the start of navigation to the first output token shown
  };
  window.tryModels = api;

  let manifest = null; // models.json
  let sessions = null; // name -> {kind, sessions...}, created on the first run
  let loading = null; // the promise of that first load (a second click waits for it)
  let runId = 0; // a newer run cancels an older one that is still decoding
  let queue = Promise.resolve(); // graph runs, one at a time (see exclusive)
  let el = {}; // the page's elements

  // ------------------------------------------------------------------------------
  // Small helpers
  // ------------------------------------------------------------------------------

  function $(id) {
    return document.getElementById(id);
  }

  function make(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const SVG_NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setState(state, message) {
    api.state = state;
    api.message = message || "";
    el.app.dataset.state = state;
    el.status.textContent = message || "";
  }

  // A message about the reader's input (role="alert": screen readers announce it).
  function showInputError(message) {
    el.error.textContent = message;
    el.error.hidden = !message;
  }

  // A message that the page cannot run the models at all, with what to do instead.
  function showUnavailable(paragraphs) {
    el.unavailable.replaceChildren();
    for (const p of paragraphs) {
      const node = make("p");
      for (const part of p) {
        const attrs = part.href ? { href: part.href } : {};
        node.append(typeof part === "string" ? part : make(part.tag, attrs, part.text));
      }
      el.unavailable.append(node);
    }
    el.unavailable.hidden = false;
    el.run.disabled = true;
  }

  function tokenName(id) {
    if (id === manifest.eos) return "<eos>";
    if (id === manifest.pad) return "<pad>";
    if (id === manifest.sos) return "<sos>";
    return String(id);
  }

  function randomInt(low, high) {
    return low + Math.floor(Math.random() * (high - low + 1));
  }

  // ------------------------------------------------------------------------------
  // The reader's input
  // ------------------------------------------------------------------------------

  /* Parse "3, 17, 5" (commas, spaces or semicolons between the numbers) into token ids.
   * Returns {tokens} or {error}; the message names the bad value and the allowed range. */
  function parseSource(text) {
    const V = manifest.vocab_size;
    const P = manifest.max_positions;
    const pieces = String(text)
      .trim()
      .split(/[\s,;]+/)
      .filter((p) => p !== "");
    if (pieces.length === 0) {
      return { error: `The box is empty: type a few numbers from 1 to ${V}, e.g. 3, 17, 5.` };
    }
    const tokens = [];
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i];
      if (!/^[+-]?\d+$/.test(piece)) {
        const shown = piece.length > 20 ? piece.slice(0, 20) + "…" : piece;
        return {
          error:
            `“${shown}” (item ${i + 1}) is not a whole number. Type whole numbers from 1 ` +
            `to ${V}, separated by commas or spaces.`,
        };
      }
      const n = Number(piece);
      if (!(n >= 1 && n <= V)) {
        const shown = piece.length > 20 ? piece.slice(0, 20) + "…" : piece;
        return {
          error:
            `${shown} (item ${i + 1}) is outside the vocabulary: the models know the ` +
            `numbers 1 to ${V} only.`,
        };
      }
      tokens.push(n);
    }
    if (tokens.length > P) {
      return {
        error:
          `That is ${tokens.length} numbers; the models' position table has ${P} ` +
          `positions, so a source can hold at most ${P} numbers.`,
      };
    }
    return { tokens };
  }

  // The instructive cases: each draws a new sequence every time its button is pressed.
  function drawCase(kind) {
    const V = manifest.vocab_size;
    const [lo, hi] = manifest.train_lengths;
    const n = randomInt(lo, hi);
    const draw = (count) => Array.from({ length: count }, () => randomInt(1, V));
    switch (kind) {
      case "random":
        return draw(n);
      case "duplicates": {
        // a few values, each several times
        const values = draw(Math.max(2, Math.floor(n / 4)));
        return Array.from({ length: n }, (_, i) => values[i % values.length]).sort(
          () => Math.random() - 0.5,
        );
      }
      case "equal":
        return new Array(n).fill(randomInt(1, V));
      case "sorted":
        return draw(n).sort((a, b) => a - b);
      case "reversed":
        return draw(n).sort((a, b) => b - a);
      case "longer":
        // longer than any training example, still inside the position table
        return draw(Math.min(manifest.max_positions, hi + 10));
      default:
        return draw(n);
    }
  }

  // ------------------------------------------------------------------------------
  // The runtime and the models
  // ------------------------------------------------------------------------------

  function loadScript(url) {
    return new Promise((resolve, reject) => {
      const script = make("script", { src: url });
      script.onload = () => resolve();
      script.onerror = () => reject(new Error(`could not load ${url}`));
      document.head.append(script);
    });
  }

  async function fetchBytes(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url} answered ${response.status}`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    api.fetched[url] = bytes.byteLength;
    return bytes;
  }

  /* Run fn() after every graph run queued before it: a reader who starts a new input while
   * the last one is still decoding must not run a session twice at once. */
  function exclusive(fn) {
    const next = queue.then(fn);
    queue = next.catch(() => {});
    return next;
  }

  function loadModels() {
    if (!loading) {
      loading = createSessions().catch((err) => {
        loading = null; // let a later click try again
        throw err;
      });
    }
    return loading;
  }

  async function createSessions() {
    setState("loading", "Loading the WebAssembly runtime and the two models…");
    if (typeof window.ort === "undefined") {
      await loadScript(new URL(manifest.runtime.script, ORT_DIR).href);
    }
    const ort = window.ort;
    ort.env.wasm.numThreads = 1; // no cross-origin isolation on a static site: one thread
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmPaths = ORT_DIR.href;
    ort.env.logLevel = "error";
    const options = { executionProviders: ["wasm"], logSeverityLevel: 3 };
    const out = {};
    for (const [name, info] of Object.entries(manifest.models)) {
      const model = { kind: info.kind };
      for (const [role, file] of Object.entries(info.files)) {
        const bytes = await fetchBytes(new URL(file, ASSETS).href);
        model[role] = await ort.InferenceSession.create(bytes, options);
      }
      out[name] = model;
    }
    // the runtime's own .wasm and .mjs files, as the browser fetched them
    for (const entry of performance.getEntriesByType("resource")) {
      if (entry.name.startsWith(ORT_DIR.href)) {
        api.fetched[entry.name] = entry.encodedBodySize || entry.transferSize || 0;
      }
    }
    sessions = out;
    return out;
  }

  function int64(values, dims) {
    return new window.ort.Tensor(
      "int64",
      BigInt64Array.from(values, (v) => BigInt(v)),
      dims,
    );
  }

  /* A decoder with the package's interface: start(src), then step(y_prev) ->
   * {logp (Float32Array of V ids), attention (L arrays of S weights)}. */
  async function startDecoder(model, src) {
    const S = src.length;
    const source = int64(src, [1, S]);
    if (model.kind === "prefix") {
      const prefix = [manifest.sos];
      return {
        async step(y) {
          if (y !== null) prefix.push(y);
          const feed = { src: source, prefix: int64(prefix, [1, prefix.length]) };
          const out = await exclusive(() => model.decoder.run(feed));
          return { logp: out.log_probs.data, attention: rows(out.attention) };
        },
      };
    }
    // "step": encoder once (Decoder.start), then one graph run per token (Decoder.step)
    const enc = await exclusive(() => model.encoder.run({ src: source }));
    let s = enc.s;
    let y = manifest.sos;
    return {
      async step(yPrev) {
        if (yPrev !== null) y = yPrev;
        const feed = { y_prev: int64([y], [1]), h: enc.h, keys: enc.keys, s };
        const out = await exclusive(() => model.step.run(feed));
        s = out.s_next; // the recurrent state s_t, fed back at the next step
        return { logp: out.log_probs.data, attention: rows(out.attention) };
      },
    };
  }

  // (1, L, S) -> L arrays of S weights
  function rows(tensor) {
    const [, L, S] = tensor.dims;
    return Array.from({ length: L }, (_, l) => Array.from(tensor.data.slice(l * S, (l + 1) * S)));
  }

  // The next token: the most probable id that is neither PAD nor <sos> (greedy_decode's rule).
  function ranked(logp, k) {
    const ids = [];
    for (let id = 0; id < logp.length; id++) {
      if (id !== manifest.pad && id !== manifest.sos) ids.push(id);
    }
    ids.sort((a, b) => logp[b] - logp[a] || a - b);
    return ids.slice(0, k).map((id) => [id, logp[id]]);
  }

  /* Decode src with both models greedily, in lockstep, redrawing after every step.
   * api.result = {src, sorted, models: {name: {tokens, steps: [{token, top, attention}]}}}. */
  async function decodeBoth(src) {
    const id = ++runId;
    const t0 = performance.now();
    const limit = Math.min(src.length + 1, manifest.max_positions);
    const sorted = [...src].sort((a, b) => a - b);
    const result = { src, sorted, models: {} };
    const live = {};
    for (const [name, model] of Object.entries(sessions)) {
      result.models[name] = { tokens: [], steps: [], done: false, selected: null };
      live[name] = await startDecoder(model, src);
    }
    api.result = result;
    el.truth.replaceChildren(
      ...[...sorted, manifest.eos].map((tok) => make("span", {}, tokenName(tok))),
    );
    el.truthBlock.hidden = false;
    renderAll(result);
    setState("running", "Decoding…");
    for (let t = 0; t < limit; t++) {
      for (const [name, out] of Object.entries(result.models)) {
        if (out.done) continue;
        const prev = t === 0 ? null : out.tokens[t - 1];
        const { logp, attention } = await live[name].step(prev);
        if (id !== runId) return; // the reader started another run
        const top = ranked(logp, 3);
        const token = top[0][0];
        out.steps.push({ token, top, attention });
        out.tokens.push(token);
        if (token === manifest.eos || t + 1 >= limit) out.done = true;
      }
      renderAll(result);
      if (api.timeToFirstOutputMs === null) api.timeToFirstOutputMs = performance.now();
      await new Promise((resolve) => setTimeout(resolve, STEP_DELAY_MS));
      if (id !== runId) return;
      if (Object.values(result.models).every((m) => m.done)) break;
    }
    const seconds = ((performance.now() - t0) / 1000).toFixed(2);
    setState(
      "done",
      `Both models decoded the ${src.length} numbers (${seconds} s, drawn step by step).`,
    );
  }

  // ------------------------------------------------------------------------------
  // Drawing
  // ------------------------------------------------------------------------------

  function renderAll(result) {
    for (const [name, out] of Object.entries(result.models)) renderModel(name, out, result);
  }

  function renderModel(name, out, result) {
    const panel = $(`try-model-${name}`);
    const info = manifest.models[name];
    const outputs = panel.querySelector(".try-output");
    outputs.replaceChildren();
    // the output so far (without <eos>), each token marked against the true sort
    const words = out.tokens.filter((tok) => tok !== manifest.eos);
    out.tokens.forEach((tok, i) => {
      const isEos = tok === manifest.eos;
      const right = isEos ? i === result.sorted.length : result.sorted[i] === tok;
      const button = make("button", {
        type: "button",
        class: `try-token ${right ? "try-right" : "try-wrong"}`,
        "data-step": String(i),
        "aria-pressed": String(selectedStep(out) === i),
        title: `step ${i + 1}: ${right ? "right" : "wrong"}; show this step's attention`,
      });
      button.append(make("span", { class: "try-mark", "aria-hidden": "true" }, right ? "✓" : "✗"));
      button.append(make("span", { class: "try-value" }, tokenName(tok)));
      button.addEventListener("click", () => {
        out.selected = i;
        renderModel(name, out, result);
      });
      outputs.append(button);
    });
    if (!out.done)
      outputs.append(make("span", { class: "try-cursor", "aria-hidden": "true" }, "…"));

    const nRight = words.filter((tok, i) => result.sorted[i] === tok).length;
    const exact =
      out.done &&
      words.length === result.sorted.length &&
      nRight === result.sorted.length &&
      out.tokens[out.tokens.length - 1] === manifest.eos;
    const verdict = panel.querySelector(".try-verdict");
    verdict.textContent = !out.done
      ? `${words.length} of ${result.sorted.length} tokens so far`
      : exact
        ? "Exactly the sorted sequence."
        : `${nRight} of ${result.sorted.length} tokens in the right place` +
          (out.tokens[out.tokens.length - 1] === manifest.eos
            ? ""
            : "; no <eos> before the step limit") +
          ".";
    verdict.className = `try-verdict ${out.done ? (exact ? "try-right" : "try-wrong") : ""}`;

    const step = selectedStep(out);
    const detail = panel.querySelector(".try-detail");
    detail.replaceChildren();
    if (step === null) return;
    const s = out.steps[step];
    const caption = make("p", { class: "try-step" });
    caption.append(`Step ${step + 1}: emitted `, make("strong", {}, tokenName(s.token)));
    caption.append(step === out.steps.length - 1 ? " (the newest token)." : ".");
    detail.append(caption);
    // the three most probable next tokens
    const list = make("ol", { class: "try-top" });
    for (const [tok, lp] of s.top) {
      const li = make("li");
      const pct = (100 * Math.exp(lp)).toFixed(1);
      li.append(make("span", { class: "try-value" }, tokenName(tok)), ` ${pct}%`);
      li.append(make("span", { class: "try-bar", style: `width:${Math.max(1, pct)}%` }));
      list.append(li);
    }
    detail.append(make("p", { class: "try-label" }, "Most probable next tokens:"), list);
    detail.append(attentionFigure(info, s, result.src));
  }

  function clearModel(name) {
    const panel = $(`try-model-${name}`);
    for (const cls of [".try-output", ".try-verdict", ".try-detail"]) {
      panel.querySelector(cls).replaceChildren();
    }
  }

  function selectedStep(out) {
    if (out.selected !== null && out.selected < out.steps.length) return out.selected;
    return out.steps.length ? out.steps.length - 1 : null;
  }

  /* One row per decoder layer (ConvS2S) or one row (GRU): the attention over the source
   * positions when the selected token was predicted. Positions that hold the emitted value
   * (where a model that sorts by looking up should look) are framed. */
  function attentionFigure(info, step, src) {
    const S = src.length;
    const L = step.attention.length;
    const cell = 20;
    const left = 72; // room for the row labels ("attention", "layer 4")
    const top = 18;
    const width = left + S * cell;
    const height = top + L * cell + 4;
    const figure = make("figure", { class: "try-attention" });
    const image = svg("svg", {
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label":
        `attention of ${L === 1 ? "the decoder" : `${L} decoder layers`} ` +
        `over ${S} source positions`,
    });
    image.style.maxWidth = `${Math.max(width, 320)}px`;
    const fontSize = S > 32 ? 9 : 11;
    src.forEach((tok, j) => {
      image.append(
        svg(
          "text",
          {
            x: left + j * cell + cell / 2,
            y: top - 5,
            "text-anchor": "middle",
            "font-size": fontSize,
            class: "try-axis",
          },
          String(tok),
        ),
      );
    });
    step.attention.forEach((weights, l) => {
      const y = top + l * cell;
      image.append(
        svg(
          "text",
          {
            x: left - 6,
            y: y + cell * 0.7,
            "text-anchor": "end",
            "font-size": 11,
            class: "try-axis",
          },
          L === 1 ? "attention" : `layer ${l + 1}`,
        ),
      );
      weights.forEach((w, j) => {
        const rect = svg("rect", {
          x: left + j * cell + 1,
          y: y + 1,
          width: cell - 2,
          height: cell - 2,
          rx: 2,
          class: "try-cell",
          "fill-opacity": (0.04 + 0.96 * w).toFixed(3),
        });
        rect.append(
          svg(
            "title",
            {},
            `layer ${l + 1}, source position ${j + 1} (${src[j]}): ${(100 * w).toFixed(1)}%`,
          ),
        );
        image.append(rect);
        if (src[j] === step.token) {
          image.append(
            svg("rect", {
              x: left + j * cell + 0.5,
              y: y + 0.5,
              width: cell - 1,
              height: cell - 1,
              rx: 2,
              class: "try-target",
            }),
          );
        }
      });
    });
    figure.append(image);
    figure.append(
      make(
        "figcaption",
        {},
        "Darker: more attention (full colour: 100%; hover a cell for its value). Framed: " +
          "the source positions that hold the emitted value.",
      ),
    );
    return figure;
  }

  // ------------------------------------------------------------------------------
  // Wiring
  // ------------------------------------------------------------------------------

  function shareLink(tokens) {
    const url = new URL(location.href);
    url.search = `?src=${tokens.join(",")}`;
    url.hash = "";
    return url;
  }

  async function run(text) {
    showInputError("");
    const parsed = parseSource(text);
    if (parsed.error) {
      runId++; // stop a decoding that is still running
      api.result = null;
      el.truthBlock.hidden = true;
      for (const name of Object.keys(manifest.models)) clearModel(name);
      showInputError(parsed.error);
      setState("input-error", "Nothing decoded: see the message above.");
      return;
    }
    const url = shareLink(parsed.tokens);
    history.replaceState(null, "", url);
    el.share.href = url.href;
    el.share.textContent = url.href;
    el.shareLine.hidden = false;
    if (el.unavailable.hidden === false) return; // the reason is on the page already
    try {
      await loadModels();
      await decodeBoth(parsed.tokens);
    } catch (err) {
      setState("unavailable", "");
      showUnavailable([[`The models could not run in this browser: ${err.message || err}.`]]);
    }
  }

  function unavailableReason() {
    if (location.protocol === "file:") {
      // a browser refuses WebAssembly modules and fetches from file:// addresses
      const folder = decodeURIComponent(location.pathname.replace(/\/[^/]*$/, "")) || ".";
      return [
        [
          "This page runs the models with WebAssembly, which a browser does not load from a ",
          { tag: "code", text: "file://" },
          " address. Serve the site over HTTP with one command:",
        ],
        [{ tag: "code", text: `python -m http.server -d "${folder}" 8000` }],
        ["then open ", { tag: "code", text: "http://localhost:8000/try.html" }, "."],
      ];
    }
    if (typeof WebAssembly !== "object" || typeof WebAssembly.instantiate !== "function") {
      return [
        [
          "This browser has no WebAssembly (or it is switched off), so it cannot run the " +
            "models. Any current Firefox, Chrome, Edge or Safari can; the pages on ",
          { tag: "a", href: "auto_examples/plot_15_decoding.html", text: "decoding" },
          " and ",
          { tag: "a", href: "auto_examples/plot_12_attention_heatmaps.html", text: "attention" },
          " show the same models' outputs as figures.",
        ],
      ];
    }
    return null;
  }

  async function main() {
    el = {
      app: $("try-app"),
      status: $("try-status"),
      error: $("try-error"),
      unavailable: $("try-unavailable"),
      form: $("try-form"),
      input: $("try-input"),
      run: $("try-run"),
      cases: $("try-cases"),
      share: $("try-share"),
      shareLine: $("try-share-line"),
      truth: $("try-truth"),
      truthBlock: $("try-truth-block"),
    };
    if (!el.app) return;
    const reason = unavailableReason();
    if (reason) {
      setState("unavailable", "");
      showUnavailable(reason);
      return; // models.json cannot be fetched either
    }
    try {
      const response = await fetch(new URL("models.json", ASSETS));
      if (!response.ok) throw new Error(`models.json answered ${response.status}`);
      manifest = await response.json();
    } catch (err) {
      setState("unavailable", "");
      showUnavailable([
        [
          "The exported models are missing from this build of the site " +
            `(${err.message || err}). Build it with `,
          { tag: "code", text: "tox -e docs" },
          ", which exports them.",
        ],
      ]);
      return;
    }
    for (const node of document.querySelectorAll("[data-try-fill]")) {
      node.textContent = String(manifest[node.dataset.tryFill]);
    }
    el.input.placeholder = `e.g. 3, 17, 5 (numbers from 1 to ${manifest.vocab_size})`;
    el.form.addEventListener("submit", (event) => {
      event.preventDefault();
      run(el.input.value);
    });
    el.cases.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-case]");
      if (!button) return;
      el.input.value = drawCase(button.dataset.case).join(", ");
      run(el.input.value);
    });
    for (const node of el.app.querySelectorAll("button, input")) node.disabled = false;
    setState("idle", "");
    // ?src=3,17,5 fills the box; without it, a random example of the training lengths
    const given = new URLSearchParams(location.search).get("src");
    el.input.value = given !== null ? given : drawCase("duplicates").join(", ");
    await run(el.input.value);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
