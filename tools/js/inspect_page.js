async ([codeSelector, ms, final]) => {
  const deadline = Date.now() + ms;
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
        const lines = pre.textContent.split("\n");
        const longest = lines.reduce((a, b) => (b.length > a.length ? b : a));
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
