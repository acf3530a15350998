// Semantic zoom (issue 43). No label is drawn smaller than a reader can read: vis's own labels stop
// below 11 px on screen (`scaling.label.drawThreshold`, set in components/mindmap.py), and a map
// zoomed out past that (Fit on a large tree) keeps one-line "landmark" labels at LANDMARK_PX for the
// nodes that have room, the upper levels first (then the larger branches), each with the size of its
// branch ("+N") — deeper nodes stay dots. Placed greedily in screen space, a label is dropped when it
// would overlap one already placed. Drawn on the canvas after vis draws (text is canvas text, never
// HTML); `hit` lets a click on a landmark choose its node.
"use strict";

window.thoughtmapLandmarks = function (network, mapEl, describe) {
  const LANDMARK_PX = 12;
  const MAX_CHARS = 34; // a landmark is one line: about a label line's width
  const MAX_LANDMARKS = 80;
  const PAD = 3;
  const widths = new Map(); // text -> its width at 100 px, measured once
  let placed = []; // the landmarks of the last drawing: {id, text, px, x, y, w, h} in the map's CSS pixels

  function width(ctx, text) {
    if (!widths.has(text)) {
      ctx.font = "100px sans-serif";
      widths.set(text, ctx.measureText(text).width);
      if (widths.size > 5000) widths.clear();
    }
    return widths.get(text) * LANDMARK_PX / 100;
  }

  function overlaps(a, b) {
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
  }

  function draw(ctx) {
    // `describe()`: {visLabelsShown, fontPx, candidates: [{id, text, radius}] best first}.
    placed = [];
    const what = describe();
    if (what.visLabelsShown || !what.candidates.length) return;
    const scale = network.getScale();
    const W = mapEl.clientWidth, H = mapEl.clientHeight;
    const positions = network.getPositions(what.candidates.map((c) => c.id));
    ctx.save();
    const ratio = network.canvas.pixelRatio || window.devicePixelRatio || 1;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0); // the map's CSS pixels
    const boxes = [];
    for (const c of what.candidates) {
      if (placed.length >= MAX_LANDMARKS) break;
      const at = positions[c.id];
      if (!at) continue;
      const dom = network.canvasToDOM(at);
      const text = c.text.length > MAX_CHARS ? c.text.slice(0, MAX_CHARS - 1).trimEnd() + "…" : c.text;
      const w = width(ctx, text) + 2 * PAD;
      const h = LANDMARK_PX + 2 * PAD;
      const box = { x: dom.x - w / 2, y: dom.y + c.radius * scale + 2, w: w, h: h };
      if (box.x + box.w < 0 || box.y + box.h < 0 || box.x > W || box.y > H) continue;
      if (boxes.some((b) => overlaps(b, box))) continue;
      boxes.push(box);
      placed.push({ id: c.id, text: text, px: LANDMARK_PX, x: box.x, y: box.y, w: box.w, h: box.h });
    }
    ctx.font = LANDMARK_PX + "px sans-serif";
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    for (const p of placed) {
      ctx.fillStyle = "rgba(255, 255, 255, 0.9)";
      ctx.strokeStyle = "#c8c8d0";
      ctx.lineWidth = 1;
      ctx.fillRect(p.x, p.y, p.w, p.h);
      ctx.strokeRect(p.x + 0.5, p.y + 0.5, p.w - 1, p.h - 1);
      ctx.fillStyle = "#1f1f1f";
      ctx.fillText(p.text, p.x + PAD, p.y + PAD);
    }
    ctx.restore();
  }

  network.on("afterDrawing", draw);

  return {
    placed: () => placed.slice(),
    hit: function (pointer) { // the node whose landmark is under the pointer (map CSS pixels), or null
      const p = placed.find((l) => pointer.x >= l.x && pointer.x <= l.x + l.w && pointer.y >= l.y && pointer.y <= l.y + l.h);
      return p ? p.id : null;
    },
  };
};
