() => {
  const api = window.tryModels || {};
  const text = (sel) => {
    const node = document.querySelector(sel);
    return node && !node.hidden ? node.textContent.trim() : "";
  };
  const shown = {};
  for (const panel of document.querySelectorAll(".try-model")) {
    const values = panel.querySelectorAll(".try-output .try-token .try-value");
    shown[panel.id.replace("try-model-", "")] = Array.from(values, (n) => n.textContent);
  }
  return { state: api.state, message: api.message, error: text("#try-error"),
           unavailable: text("#try-unavailable"), shown, result: api.result,
           timeToFirstOutputMs: api.timeToFirstOutputMs,
           pageWidth: document.documentElement.scrollWidth, windowWidth: window.innerWidth };
}
