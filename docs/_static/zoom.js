// Click a gallery figure to open its full-resolution image (the 150 dpi PNG) in a new tab.
document.addEventListener("DOMContentLoaded", () => {
  const selector = "img.sphx-glr-single-img, img.sphx-glr-multi-img, figure img";
  for (const img of document.querySelectorAll(selector)) {
    if (img.closest("a")) continue;  // already a link (e.g. a thumbnail)
    const link = document.createElement("a");
    link.href = img.currentSrc || img.src;
    link.target = "_blank";
    link.rel = "noopener";
    link.className = "zoom-link";
    link.title = "Open the figure at full size";
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  }
});
