([final, previous]) => {
  const api = window.tryModels;
  if (!api || !final.includes(api.state)) return false;
  const src = api.result ? api.result.src.join(",") : "";
  return previous === null || src !== previous || api.state !== "done";
}
