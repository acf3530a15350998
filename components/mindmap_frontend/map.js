// The mind map's frame: one vis-network Network for the life of the iframe, fed by Streamlit's
// component messages. Every render sends the whole map; only what changed reaches vis's DataSets
// (added, updated or removed by id), so the viewport, the selection and collapsed subtrees survive
// the live updates. Data from the run (labels, tooltips, legend words) is untrusted: it only ever
// goes through textContent or vis's canvas text, never innerHTML, and nothing here navigates.
"use strict";

(function () {
  const HALO = "rgba(30, 110, 255, 0.85)";
  const SVG = "http://www.w3.org/2000/svg";
  const root = document.getElementById("root");
  const mapEl = document.getElementById("map");
  const tooltip = document.getElementById("tooltip");
  const legendEl = document.getElementById("legend");
  const searchEl = document.getElementById("search");
  const searchStatus = document.getElementById("search-status");
  const collapseBtn = document.getElementById("collapse");
  const fullscreenBtn = document.getElementById("fullscreen");
  const legendBtn = document.getElementById("legend-toggle");
  const stage = document.getElementById("stage");
  const outlineEl = document.getElementById("outline");
  const outlineBtn = document.getElementById("outline-toggle");
  // Semantic zoom: vis draws a label only from this size on screen (its drawThreshold, set by
  // components/mindmap.py, less one); below it, landmarks.js labels what has room.
  const LEGIBLE_PX = 11;
  // The outline opens by itself beside a map too big to show whole readably when the frame is this
  // wide (full screen, a wide window): the map keeps 600 px beside it. In the Explore page's column at
  // 1440 px (about 650 px) it is a button: beside it, the map had room for the root alone.
  const OUTLINE_MIN_FRAME_PX = 830;

  const nodes = new vis.DataSet();
  const edges = new vis.DataSet();
  const items = new Map(); // node id -> the item as Streamlit sent it (label, tip, parent, ...)
  const edgeTips = new Map(); // edge id -> its hover text (non-structural edges only)
  const shownNodes = new Map(); // id -> JSON of what vis has, to send only changes
  const shownEdges = new Map();
  const collapsed = new Set();
  let network = null;
  let frameHeight = 0;
  let minScale = 0.8;
  // A map that fits whole at nine tenths of the readable scale (labels 11.5 px instead of 12.8) is
  // shown whole: a run of six nodes with long questions was opened at the readable scale with the
  // last column's labels cut at the frame's edge, for want of a tenth.
  const WHOLE_AT = 0.9;
  let lastOptions = "";
  let lastLegend = "";
  let shownSelection = null; // the page's selection last followed, or the frame's own choice since
  let hovered = null; // the node vis last reported under the pointer (until its blurNode)
  let userMoved = false; // once the reader zooms, pans or fits, live updates leave the view alone
  let follow = null; // the node a live run works on (while the reader has not picked one)
  let showedWhole = false; // the last placed view showed the whole map
  let labelsMeasured = false; // vis has drawn twice: the nodes' boxes hold their labels
  let placing = false; // placeView opens the outline and places the view itself
  let draws = 0; // drawings of this map (another run's map starts again)
  let outlineAuto = true; // until the reader shows or hides the outline, it opens by itself
  let lastReveal = null; // the last node made by the reader's steering that was brought into view
  let landmarkOrder = []; // [{id, text, depth, count}]: who gets a landmark first when zoomed out
  let landmarks = null;
  let hiddenNow = new Set();
  const outline = window.thoughtmapOutline(outlineEl, function (id) {
    // An entry chosen: as a click on the map, and the map shows it.
    reveal(id);
    network.selectNodes([id]);
    frameNode(id, false);
    choose(id);
    updateCollapseButton();
  }, descendants);
  let search = { query: "", index: -1 };
  // After the frame chose a node itself, every render until the page says it received that choice
  // carries a selection the page made before it (quick choices, a search's Enter after Enter, can
  // each be a render behind): those selections are not followed (one of them put an earlier search
  // match back, under a reader about to click Expand). The page reads the choice before it builds
  // the map, so the render that says it arrived already selects it.
  const CHOICE_RESEND_MS = 3000;
  let pendingChain = null; // the `chain` of a choice the page has not said it received
  let pendingNode = null; // the node of that choice
  let pendingResend = null; // what the resend timer does next (the browser tests call it at once)
  let pendingTimer = null;
  let pageSelected = null; // the page's selection in its last render (followed again on giving up)
  let renders = 0; // renders handled (the browser tests wait on it)

  // ------------------------------------------------------------------ Streamlit's component protocol

  function post(type, extra) {
    window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type: type }, extra), "*");
  }

  function choose(id, tries, chain) {
    // Sent like a click: Streamlit reruns and the node panel shows the node. `seq` makes a second
    // choice of the same node a new event; `chain` is the first send's seq, kept by its resends.
    const seq = Date.now() + ":" + Math.random();
    chain = chain || seq;
    post("streamlit:setComponentValue", { value: { node: id, seq: seq, chain: chain }, dataType: "json" });
    pendingChain = chain;
    pendingNode = shownSelection = id; // shown now; the page's own selections count from here
    outline.select(id);
    // A value sent while a live refresh reruns the page is now and then lost on Streamlit's side
    // (the panel never shows the node): sent again (a new seq, so Streamlit reruns; the same chain,
    // so a page that read the first does not take it as a new choice), twice at most, until the
    // page says it received the chain. Then given up, and the page's selection is followed again.
    clearTimeout(pendingTimer);
    pendingResend = function () {
      pendingResend = null;
      if (pendingChain !== chain) return;
      if ((tries || 0) < 2 && items.has(id)) choose(id, (tries || 0) + 1, chain);
      else { endPending(); followPage(true); }
    };
    pendingTimer = setTimeout(pendingResend, CHOICE_RESEND_MS);
  }

  function endPending() {
    pendingChain = pendingNode = pendingResend = null;
    clearTimeout(pendingTimer);
  }

  function followPage(bring) {
    // The page's selection, when it is not the one shown: selected, and brought into view (not on
    // the first render: the first view is placed around it).
    if (pageSelected === shownSelection) return;
    shownSelection = pageSelected;
    outline.select(pageSelected !== null && items.has(pageSelected) ? pageSelected : null);
    if (pageSelected !== null && items.has(pageSelected)) {
      network.selectNodes([pageSelected]);
      if (bring) bringIntoView(pageSelected);
    }
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent || !event.data || event.data.type !== "streamlit:render") return;
    render(event.data.args || {});
  });

  // ------------------------------------------------------------------ data

  function children() {
    const kids = new Map();
    for (const item of items.values()) {
      if (item.parent !== null && items.has(item.parent)) {
        if (!kids.has(item.parent)) kids.set(item.parent, []);
        kids.get(item.parent).push(item.id);
      }
    }
    return kids;
  }

  function descendants(id, kids) {
    const out = [];
    const stack = (kids.get(id) || []).slice();
    const seen = new Set();
    while (stack.length) {
      const next = stack.pop();
      if (seen.has(next)) continue;
      seen.add(next);
      out.push(next);
      stack.push(...(kids.get(next) || []));
    }
    return out;
  }

  function hiddenByCollapse(kids) {
    const hidden = new Set();
    for (const id of collapsed) {
      if (!items.has(id)) { collapsed.delete(id); continue; }
      for (const d of descendants(id, kids)) hidden.add(d);
    }
    return hidden;
  }

  function syncSet(dataset, want, shown) {
    const ids = new Set(want.map((w) => w.id));
    const gone = [...shown.keys()].filter((id) => !ids.has(id));
    if (gone.length) { dataset.remove(gone); gone.forEach((id) => shown.delete(id)); }
    const changed = [];
    for (const w of want) {
      const json = JSON.stringify(w);
      if (shown.get(w.id) !== json) { changed.push(w); shown.set(w.id, json); }
    }
    if (changed.length) dataset.update(changed);
  }

  function syncNodes() {
    const kids = children();
    const hidden = hiddenByCollapse(kids);
    const want = [];
    for (const item of items.values()) {
      const shown = Object.assign({}, item);
      delete shown.tip; delete shown.text; delete shown.number; delete shown.parent;
      shown.hidden = hidden.has(item.id);
      if (collapsed.has(item.id)) shown.label += "\n⊞ " + descendants(item.id, kids).length + " hidden";
      want.push(shown);
    }
    syncSet(nodes, want, shownNodes);
    hiddenNow = hidden;
    rankLandmarks(kids);
    outline.update(items, kids);
    updateCollapseButton();
  }

  function rankLandmarks(kids) {
    // Zoomed out, the upper levels are labelled first, then the larger branches, then the older nodes.
    const depth = new Map();
    const ordered = [...items.values()];
    for (const item of ordered) {
      let d = 0;
      const seen = new Set();
      for (let p = item.parent; p !== null && items.has(p) && !seen.has(p); p = items.get(p).parent) { seen.add(p); d++; }
      depth.set(item.id, d);
    }
    landmarkOrder = ordered.map(function (item) {
      const count = descendants(item.id, kids).length;
      const head = "#" + item.number + " ";
      const tail = count ? "  +" + count : "";
      const room = 34 - head.length - tail.length;
      const text = item.text.length > room ? item.text.slice(0, room - 1).trimEnd() + "…" : item.text;
      return { id: item.id, text: head + text + tail, depth: depth.get(item.id), count: count, number: item.number };
    }).sort((a, b) => a.depth - b.depth || b.count - a.count || a.number - b.number);
  }

  function describeLandmarks() {
    // For landmarks.js: the nodes whose own label vis does not draw at this scale, best first (the
    // selected node, the node the run works on, then the branches in `landmarkOrder`).
    const scale = network.getScale();
    const first = [shownSelection, followed()].filter((id) => id !== null && items.has(id));
    const order = first.map((id) => landmarkOrder.find((l) => l.id === id)).filter(Boolean)
      .concat(landmarkOrder.filter((l) => !first.includes(l.id)));
    const candidates = [];
    for (const l of order) {
      const item = items.get(l.id);
      if (!item || hiddenNow.has(l.id) || item.font.size * scale >= LEGIBLE_PX) continue;
      if (!l.count && !first.includes(l.id)) continue; // a leaf stays a dot: the branches are the landmarks
      const body = network.body.nodes[l.id];
      const radius = body && body.shape && body.shape.height ? body.shape.height / 2 : item.size || 10;
      candidates.push({ id: l.id, text: l.text, radius: radius });
    }
    return { visLabelsShown: !candidates.length, candidates: candidates };
  }

  function render(args) {
    if (args.height && args.height !== frameHeight) {
      frameHeight = args.height;
      root.style.height = frameHeight + "px";
      post("streamlit:setFrameHeight", { height: frameHeight });
    }
    if (typeof args.minScale === "number") minScale = args.minScale;
    const first = network === null;
    if (first) create(args.options || {});
    else if (JSON.stringify(args.options || {}) !== lastOptions) network.setOptions(withChosen(args.options || {}));
    lastOptions = JSON.stringify(args.options || {});

    items.clear();
    for (const item of args.nodes || []) items.set(item.id, item);
    // Streamlit may keep this frame for another run's map (no node in common): it starts as a first
    // map does, its view, folds and search its own, and a choice pending on the old one is dropped.
    if (shownNodes.size && ![...items.keys()].some((id) => shownNodes.has(id))) {
      userMoved = showedWhole = labelsMeasured = false;
      draws = 0;
      collapsed.clear();
      search = { query: "", index: -1 };
      searchEl.value = searchStatus.textContent = "";
      shownSelection = null;
      endPending();
      nodes.clear(); edges.clear(); shownNodes.clear(); shownEdges.clear();
    }
    edgeTips.clear();
    const wantEdges = [];
    for (const edge of args.edges || []) {
      if (edge.tip) edgeTips.set(edge.id, edge.tip);
      const shown = Object.assign({}, edge);
      delete shown.tip; delete shown.structural;
      wantEdges.push(shown);
    }
    const hadNodes = shownNodes.size > 0;
    syncNodes();
    syncSet(edges, wantEdges, shownEdges);

    if (JSON.stringify(args.legend || []) !== lastLegend) {
      lastLegend = JSON.stringify(args.legend || []);
      drawLegend(args.legend || []);
    }
    pageSelected = args.selected !== undefined ? args.selected : null;
    if (pendingNode !== null && !items.has(pendingNode)) endPending(); // its node is gone
    if (pendingChain !== null && args.received === pendingChain) endPending();
    const wasFollowing = follow !== null;
    follow = args.follow !== undefined ? args.follow : null;
    // The run ended, or the reader picked a node: a view placed around the work stays where the
    // reader watched it (it used to jump back to the question at the run's end).
    if (wasFollowing && follow === null && !showedWhole) userMoved = true;
    if (pendingChain === null) followPage(hadNodes);
    if (!userMoved && items.size) keepInView(); // live growth stays in view until the reader moves
    // A node the reader's steering made (a follow-up, new branches): brought into view even when they
    // moved the map, for they asked for it. Not on the first render: the run is just being opened.
    const steered = args.reveal !== undefined ? args.reveal : null;
    if (steered !== null && steered !== lastReveal && hadNodes && items.has(steered)) showSteered(steered);
    lastReveal = steered;
    updateCollapseButton();
    renders += 1;
  }

  // ------------------------------------------------------------------ the network

  function withChosen(options) {
    // Selection and hover add a halo; they never change the node's colours (its border is its status).
    const merged = JSON.parse(JSON.stringify(options));
    merged.nodes = merged.nodes || {};
    merged.nodes.chosen = {
      node: function (values, id, selected, hovering) {
        if (selected || hovering) {
          values.shadow = true;
          values.shadowColor = selected ? HALO : "rgba(30, 110, 255, 0.4)";
          values.shadowSize = selected ? 22 : 12;
          values.shadowX = 0;
          values.shadowY = 0;
        }
      },
      label: false,
    };
    merged.edges = merged.edges || {};
    merged.edges.chosen = false;
    return merged;
  }

  function create(options) {
    network = new vis.Network(mapEl, { nodes: nodes, edges: edges }, withChosen(options));
    landmarks = window.thoughtmapLandmarks(network, mapEl, describeLandmarks);
    network.on("afterDrawing", function () {
      // vis sizes a label as it draws it and takes it into the node's box at the next drawing: from the
      // second drawing on, the boxes hold the labels. The first view is placed again then (the root's
      // question, centred under it, was cut at the map's left edge when placed from shapes alone).
      // (Placed after the drawing's task: vis also draws in the middle of a DataSet update.)
      if (++draws !== 2) return;
      labelsMeasured = true;
      setTimeout(function () { if (!userMoved) placeView(); }, 0);
    });
    network.on("click", function (params) {
      hideTooltip();
      const landmark = params.nodes.length ? null : landmarks.hit(params.pointer.DOM);
      if (landmark !== null) network.selectNodes([landmark]);
      if (params.nodes.length || landmark !== null) choose(params.nodes.length ? params.nodes[0] : landmark);
      updateCollapseButton();
    });
    network.on("hoverNode", function (params) {
      hovered = params.node;
      showTooltip(items.get(params.node) && items.get(params.node).tip, params.pointer);
    });
    network.on("blurNode", function () { hovered = null; hideTooltip(); });
    mapEl.addEventListener("mousemove", showHiddenTooltip);
    network.on("hoverEdge", function (params) { showTooltip(edgeTips.get(params.edge), params.pointer); });
    network.on("blurEdge", hideTooltip);
    network.on("dragStart", function () { userMoved = true; hideTooltip(); });
    network.on("zoom", function () { userMoved = true; hideTooltip(); });
    mapEl.addEventListener("mouseleave", hideTooltip);
    network.on("resize", function () { if (!userMoved) initialView(); });
  }

  function bounds(ids) {
    const positions = network.getPositions(ids);
    const box = { left: Infinity, right: -Infinity, top: Infinity, bottom: -Infinity };
    for (const id of Object.keys(positions)) {
      const b = network.getBoundingBox(id);
      box.left = Math.min(box.left, b.left); box.right = Math.max(box.right, b.right);
      box.top = Math.min(box.top, b.top); box.bottom = Math.max(box.bottom, b.bottom);
    }
    return box;
  }

  function visibleIds() {
    return [...items.keys()].filter((id) => { const n = nodes.get(id); return n && !n.hidden; });
  }

  function initialView() {
    // Labels drawn outside their shape (a dot's question under it) are measured when first drawn:
    // a map shown whole is framed again then, so the fit counts their width and no label is cut at
    // the edge. (The first view of a larger map is placed again at the second drawing: `create`.)
    if (placeView()) network.once("afterDrawing", function () { if (!userMoved) placeView(); });
  }

  function keepInView() {
    // The whole map while it is readable so. Past that, the node the run works on stays in sight,
    // with the way to it; the view moves only when that node would leave it, so a reader watching a
    // search jump between branches is not shaken at every refresh.
    const working = followed();
    if (!showedWhole && working !== null && nearlyInView(working)) return;
    initialView();
  }

  function followed() {
    // The node to follow, if it is drawn (not under a collapsed node).
    const shown = follow !== null ? nodes.get(follow) : null;
    return shown && !shown.hidden ? follow : null;
  }

  function nearlyInView(id) {
    const at = network.getPositions([id])[id];
    if (!at) return false;
    const dom = network.canvasToDOM(at);
    // With room for its label: half a label's width beside it, two lines under it.
    return dom.x >= 60 && dom.y >= 40 && dom.x <= mapEl.clientWidth - 130 && dom.y <= mapEl.clientHeight - 70;
  }

  function fitWithLabels(ids) {
    // vis-network's fit frames the shapes; this frames the shapes with their labels.
    network.fit({ nodes: ids, animation: false });
    const box = bounds(ids);
    if (![box.left, box.right, box.top, box.bottom].every(Number.isFinite)) return; // not laid out yet
    const pad = 12;
    const width = Math.max(box.right - box.left, 1);
    const height = Math.max(box.bottom - box.top, 1);
    const scale = Math.min(network.getScale(), (mapEl.clientWidth - 2 * pad) / width,
                           (mapEl.clientHeight - 2 * pad) / height);
    network.moveTo({ position: { x: (box.left + box.right) / 2, y: (box.top + box.bottom) / 2 }, scale: scale,
                     animation: false });
  }

  function placeView() {
    // The whole map if it is readable so (returns true); else the readable scale, around the node a
    // live run works on, or the selected node, or the first one, with as much of the map as fits on
    // its side. Fit is a button.
    const ids = visibleIds();
    // Not laid out yet (an iframe Streamlit has not sized): a fit now would leave a broken camera.
    if (!ids.length || !mapEl.clientWidth || !mapEl.clientHeight) return false;
    fitWithLabels(ids);
    const scale = network.getScale();
    showedWhole = scale >= minScale * WHOLE_AT;
    if (!showedWhole && outlineAuto && outlineEl.hidden && root.clientWidth >= OUTLINE_MIN_FRAME_PX) {
      // Too big to show whole readably: the outline lists it beside the map (the map narrows: placed again).
      placing = true;
      setOutline(true);
      placing = false;
      return placeView();
    }
    if (showedWhole) {
      if (scale > 1.3) network.moveTo({ scale: 1.3, animation: false });
      return true;
    }
    const focus = followed() !== null ? followed()
      : shownSelection !== null && items.has(shownSelection) ? shownSelection : ids[0];
    network.moveTo({ position: framedAround(focus, ids, minScale, true), scale: minScale, animation: false });
    return false;
  }

  function framedAround(focus, ids, scale, first) {
    // Where to centre the view at `scale` to show `focus`: centred on it, but no empty band left of
    // or above the map: a tree growing rightwards starts at the left, a grid growing downwards
    // (MTQA's matrix under its question) at the top. A `first` view of the root starts at the map's
    // left edge: the root of a grid sits above its middle, and centring it cut the first column in
    // half (the root chosen later is framed like any node: a grid's stays in view). Nor past the
    // map's right or bottom edge: a node far in (a finished search's answer) is shown with as much
    // of the way to it as fits, not beside an empty half.
    const at = network.getPositions([focus])[focus];
    const box = bounds(ids);
    const halfW = mapEl.clientWidth / 2 / scale;
    const halfH = mapEl.clientHeight / 2 / scale;
    // Room for half a label (about 110 px on screen) beside the outermost nodes until vis has drawn the
    // labels once: from then on the boxes hold them, and a margin that counted them again pushed the
    // tree's first levels out of view.
    // (Right of the map, where new nodes grow unmeasured, the room stays.)
    const leftX = box.left - (labelsMeasured ? 12 : 110) / scale + halfW;
    const rightX = box.right + 110 / scale - halfW;
    const topY = box.top - 40 / scale + halfH; // room above the topmost shape
    const bottomY = box.bottom + 60 / scale - halfH; // room for the labels under the lowest shapes
    const x = first && focus === ids[0] ? leftX : Math.max(Math.min(at.x, rightX), leftX);
    return { x: x, y: Math.max(Math.min(at.y, bottomY), topY) };
  }

  function bringIntoView(id) {
    const at = network.getPositions([id])[id];
    if (!at) return;
    const dom = network.canvasToDOM(at);
    if (dom.x < 40 || dom.y < 40 || dom.x > mapEl.clientWidth - 40 || dom.y > mapEl.clientHeight - 40) {
      const scale = Math.max(network.getScale(), minScale);
      // Framed as a first view is: the way to it in sight, no empty band beside the map.
      network.moveTo({ position: framedAround(id, visibleIds(), scale, false), scale: scale, animation: false });
      userMoved = true;
    }
  }

  function showSteered(id) {
    // Unfolded if a fold hid it, listed in the outline, and in view at a readable scale with the way
    // to it (framed as a first view is), however the reader had moved the map.
    reveal(id);
    outline.reveal(id);
    outline.draw();
    frameNode(id, true);
  }

  function frameNode(id, always) {
    // At a readable scale, with the way to it (framed as a first view is); a node already in sight at
    // a readable scale stays where it is unless `always`.
    const scale = Math.max(network.getScale(), minScale);
    if (always || scale !== network.getScale() || !nearlyInView(id)) {
      network.moveTo({ position: framedAround(id, visibleIds(), scale, false), scale: scale, animation: false });
    }
    userMoved = true;
  }

  // ------------------------------------------------------------------ tooltip (text only)

  function showTooltip(text, pointer) {
    if (!text) return hideTooltip();
    tooltip.textContent = text;
    tooltip.hidden = false;
    const x = pointer && pointer.DOM ? pointer.DOM.x : 0; // in the map's own pixels
    const y = pointer && pointer.DOM ? pointer.DOM.y : 0;
    const left = Math.min(x + 14, mapEl.clientWidth - tooltip.offsetWidth - 6);
    const top = y + 18 + tooltip.offsetHeight > mapEl.clientHeight ? y - tooltip.offsetHeight - 10 : y + 18;
    tooltip.style.left = mapEl.offsetLeft + Math.max(4, left) + "px"; // the outline may sit left of the map
    tooltip.style.top = Math.max(4, top) + "px";
  }

  function hideTooltip() {
    tooltip.hidden = true;
  }

  function showHiddenTooltip(event) {
    // vis reports a hover only when the node under the pointer changes: after a click or a trip
    // outside the map hid the tooltip, moving on the same node shows it again.
    if (!tooltip.hidden || hovered === null || !items.has(String(hovered))) return;
    const rect = mapEl.getBoundingClientRect();
    const at = { x: event.clientX - rect.left, y: event.clientY - rect.top };
    if (String(network.getNodeAt(at)) === String(hovered)) showTooltip(items.get(String(hovered)).tip, { DOM: at });
  }

  // ------------------------------------------------------------------ toolbar

  function selectedId() {
    const ids = network ? network.getSelectedNodes() : [];
    return ids.length ? String(ids[0]) : null;
  }

  function updateCollapseButton() {
    const id = selectedId();
    const kids = id ? children().get(id) : null;
    collapseBtn.disabled = !kids || !kids.length;
    // "Fold" and "Unfold", not "Collapse" and "Expand": Expand is a steering command (new branches).
    collapseBtn.textContent = id && collapsed.has(id) ? "Unfold" : "Fold";
  }

  function toggleCollapse() {
    const id = selectedId();
    if (!id) return;
    if (collapsed.has(id)) collapsed.delete(id); else collapsed.add(id);
    syncNodes();
  }

  function matches(query) {
    const q = query.trim().toLowerCase();
    if (!q) return [];
    const number = /^#\d+$/.test(q) ? Number(q.slice(1)) : null;
    return [...items.values()]
      .filter((item) => (number !== null ? item.number === number : item.text.toLowerCase().includes(q)))
      .sort((a, b) => a.number - b.number)
      .map((item) => item.id);
  }

  function reveal(id) {
    // A match inside a collapsed subtree: open the collapsed nodes above it.
    let parent = items.get(id).parent;
    const seen = new Set();
    while (parent !== null && items.has(parent) && !seen.has(parent)) {
      seen.add(parent);
      collapsed.delete(parent);
      parent = items.get(parent).parent;
    }
    syncNodes();
  }

  function find() {
    const query = searchEl.value;
    const found = matches(query);
    if (!found.length) {
      searchStatus.textContent = query.trim() ? "No node matches" : "";
      search = { query: "", index: -1 };
      return;
    }
    const index = query === search.query ? (search.index + 1) % found.length : 0;
    search = { query: query, index: index };
    const id = found[index];
    reveal(id);
    network.selectNodes([id]);
    outline.select(id);
    network.moveTo({ position: network.getPositions([id])[id], scale: Math.max(network.getScale(), minScale),
                     animation: false });
    userMoved = true;
    searchStatus.textContent = (index + 1) + " of " + found.length;
    updateCollapseButton();
    choose(id);
  }

  function zoom(factor) {
    network.moveTo({ scale: network.getScale() * factor, animation: { duration: 150, easingFunction: "easeOutQuad" } });
    userMoved = true;
  }

  function toggleFullscreen() {
    if (document.fullscreenElement) document.exitFullscreen();
    else if (root.requestFullscreen) root.requestFullscreen().catch(function () {
      fullscreenBtn.textContent = "Full screen unavailable";
    });
  }

  document.addEventListener("fullscreenchange", function () {
    const full = document.fullscreenElement === root;
    fullscreenBtn.textContent = full ? "Exit full screen" : "Full screen";
    root.style.height = full ? "" : frameHeight + "px";
    if (network) network.redraw();
  });

  searchEl.addEventListener("keydown", function (event) {
    if (event.key === "Enter") { event.preventDefault(); find(); }
  });
  searchEl.addEventListener("input", function () {
    searchStatus.textContent = "";
    outline.search(searchEl.value.trim() ? new Set(matches(searchEl.value)) : null); // the outline lists the matches
  });
  document.getElementById("fit").addEventListener("click", function () {
    fitWithLabels(visibleIds());
    userMoved = true;
  });
  // A plain wheel over the map scrolls the page, as it does over the rest of it: the map fills most
  // of the page's width, and zooming on every wheel trapped a reader who meant to scroll past it.
  // Ctrl (or ⌘) + wheel, a trackpad pinch (a wheel with Ctrl) or any wheel in full screen zooms.
  // (Caught before vis-network's own listener, below this element, ever sees it.)
  const wheelHint = document.getElementById("wheel-hint");
  let wheelHintTimer = null;
  mapEl.addEventListener("wheel", function (event) {
    if (event.ctrlKey || event.metaKey || document.fullscreenElement) return;
    event.stopPropagation();
    wheelHint.hidden = false;
    clearTimeout(wheelHintTimer);
    wheelHintTimer = setTimeout(function () { wheelHint.hidden = true; }, 1200);
  }, { capture: true });
  document.getElementById("zoom-in").addEventListener("click", function () { zoom(1.3); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom(1 / 1.3); });
  collapseBtn.addEventListener("click", toggleCollapse);
  outlineBtn.addEventListener("click", function () {
    outlineAuto = false;
    setOutline(outlineEl.hidden);
  });

  function setOutline(show) {
    outlineEl.hidden = !show;
    stage.classList.toggle("with-outline", show);
    outlineBtn.setAttribute("aria-pressed", String(show));
    if (show) outline.draw();
    // The canvas takes the map's new width now (vis would notice within a second); vis keeps the view's
    // centre, which cut a view placed from the map's left edge: an unmoved view is placed again.
    if (!network) return;
    network.setSize();
    if (!userMoved && !placing) placeView();
    network.redraw();
  }
  fullscreenBtn.addEventListener("click", toggleFullscreen);
  legendBtn.addEventListener("click", function () {
    legendEl.hidden = !legendEl.hidden;
    legendBtn.setAttribute("aria-expanded", String(!legendEl.hidden));
  });

  // ------------------------------------------------------------------ legend, drawn with the map's styles

  function svgEl(name, attrs) {
    const el = document.createElementNS(SVG, name);
    for (const key of Object.keys(attrs)) el.setAttribute(key, String(attrs[key]));
    return el;
  }

  function polygon(points) {
    return points.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ");
  }

  function shapeEl(shape, cx, cy, r, style) {
    const star = [];
    for (let i = 0; i < 10; i++) {
      const a = -Math.PI / 2 + (i * Math.PI) / 5;
      const rr = i % 2 ? r * 0.45 : r;
      star.push([cx + rr * Math.cos(a), cy + rr * Math.sin(a)]);
    }
    const hex = [];
    for (let i = 0; i < 6; i++) hex.push([cx + r * Math.cos((i * Math.PI) / 3), cy + r * Math.sin((i * Math.PI) / 3)]);
    const shapes = {
      box: () => svgEl("rect", { x: cx - r * 1.3, y: cy - r * 0.8, width: r * 2.6, height: r * 1.6, rx: 3 }),
      square: () => svgEl("rect", { x: cx - r, y: cy - r, width: r * 2, height: r * 2 }),
      ellipse: () => svgEl("ellipse", { cx: cx, cy: cy, rx: r * 1.3, ry: r * 0.8 }),
      diamond: () => svgEl("polygon", { points: polygon([[cx, cy - r], [cx + r, cy], [cx, cy + r], [cx - r, cy]]) }),
      triangle: () => svgEl("polygon", { points: polygon([[cx, cy - r], [cx + r, cy + r * 0.8], [cx - r, cy + r * 0.8]]) }),
      triangleDown: () => svgEl("polygon", { points: polygon([[cx, cy + r], [cx + r, cy - r * 0.8], [cx - r, cy - r * 0.8]]) }),
      star: () => svgEl("polygon", { points: polygon(star) }),
      hexagon: () => svgEl("polygon", { points: polygon(hex) }),
    };
    const el = (shapes[shape] || (() => svgEl("circle", { cx: cx, cy: cy, r: r })))();
    el.setAttribute("fill", style.fill);
    el.setAttribute("stroke", style.border);
    el.setAttribute("stroke-width", style.width || 2);
    if (style.dashes) el.setAttribute("stroke-dasharray", "4 3");
    return el;
  }

  function swatch(item) {
    const svg = svgEl("svg", { width: 46, height: 26, viewBox: "0 0 46 26", "aria-hidden": "true" });
    if (item.type === "edge") {
      svg.appendChild(svgEl("line", { x1: 3, y1: 13, x2: 36, y2: 13, stroke: item.colour, "stroke-width": 2,
                                      "stroke-dasharray": item.dashes ? "5 4" : "none" }));
      svg.appendChild(svgEl("polygon", { points: "36,8 44,13 36,18", fill: item.colour }));
    } else if (item.type === "palette") {
      item.fills.forEach((fill, i) => svg.appendChild(shapeEl(item.shape, 6 + i * 8.5, 13, 5, { fill: fill, border: item.border, width: 1 })));
    } else if (item.type === "size") {
      svg.appendChild(svgEl("circle", { cx: 9, cy: 13, r: 5, fill: "#cfcfd8", stroke: "#6b6b6b" }));
      svg.appendChild(svgEl("circle", { cx: 30, cy: 13, r: 10, fill: "#cfcfd8", stroke: "#6b6b6b" }));
    } else {
      if (item.halo) svg.appendChild(svgEl("circle", { cx: 23, cy: 13, r: 12, fill: "rgba(30, 110, 255, 0.35)" }));
      const width = item.type === "status" ? 3 : 2;
      svg.appendChild(shapeEl(item.shape, 23, 13, 8, { fill: item.fill, border: item.border, dashes: item.dashes, width: width }));
    }
    return svg;
  }

  function drawLegend(sections) {
    legendEl.replaceChildren();
    for (const section of sections) {
      const heading = document.createElement("h4");
      heading.textContent = section.title;
      legendEl.appendChild(heading);
      for (const item of section.items) {
        const row = document.createElement("div");
        row.className = "item";
        row.appendChild(swatch(item));
        const words = document.createElement("span");
        words.textContent = item.text;
        row.appendChild(words);
        legendEl.appendChild(row);
      }
    }
  }

  // ------------------------------------------------------------------ a hook for the browser tests

  window.__thoughtmap = {
    get network() { return network; },
    renders: () => renders,
    pending: () => pendingChain !== null,
    resendNow: function () { if (pendingResend) { clearTimeout(pendingTimer); pendingResend(); } },
    scale: () => network.getScale(),
    minScale: () => minScale,
    // Each node as drawn: its number, fill and border, hidden or not, its centre in the map canvas's
    // CSS pixels, whether that centre is inside the map's box, the font size on screen, selected or not.
    // `fill` and `border` are what vis paints in the node's current state (its formatting values after
    // our `chosen` function for a selected or hovered node), so a test sees what the reader sees.
    nodes: function () {
      const scale = network.getScale();
      const selected = new Set(network.getSelectedNodes().map(String));
      return [...items.values()].map(function (item) {
        const shown = nodes.get(item.id);
        const body = network.body.nodes[item.id];
        const at = network.getPositions([item.id])[item.id];
        const dom = at ? network.canvasToDOM(at) : { x: NaN, y: NaN };
        const drawn = body ? body.getFormattingValues() : null;
        // The shape with its label (as last drawn), in the canvas's CSS pixels.
        const box = body ? network.getBoundingBox(item.id) : null;
        const corner = box ? network.canvasToDOM({ x: box.left, y: box.top }) : null;
        const farCorner = box ? network.canvasToDOM({ x: box.right, y: box.bottom }) : null;
        return {
          id: item.id, number: item.number, text: item.text, label: shown ? shown.label : "",
          fill: drawn ? drawn.color : item.color.background, border: drawn ? drawn.borderColor : null,
          selectedBorder: body ? body.options.color.highlight.border : null,
          hidden: Boolean(shown && shown.hidden), selected: selected.has(item.id),
          x: dom.x, y: dom.y, size: body ? body.shape.width || 2 * body.options.size : 0,
          inView: dom.x >= 0 && dom.y >= 0 && dom.x <= mapEl.clientWidth && dom.y <= mapEl.clientHeight,
          wholeInView: Boolean(corner) && corner.x >= 0 && corner.y >= 0 && farCorner.x <= mapEl.clientWidth &&
            farCorner.y <= mapEl.clientHeight,
          fontPx: (body ? body.options.font.size : 0) * scale,
        };
      });
    },
    map: () => ({ width: mapEl.clientWidth, height: mapEl.clientHeight }),
    // The labels drawn now: vis's own (a node shown, in view, at or above vis's drawThreshold less one,
    // its own rule) and the landmarks; each with its size on screen.
    labels: function () {
      const scale = network.getScale();
      const own = [...items.values()].filter(function (item) {
        const body = network.body.nodes[item.id];
        if (!body || hiddenNow.has(item.id)) return false;
        const at = network.canvasToDOM(network.getPositions([item.id])[item.id]);
        const inView = at.x >= 0 && at.y >= 0 && at.x <= mapEl.clientWidth && at.y <= mapEl.clientHeight;
        return inView && body.options.font.size * scale >= body.options.scaling.label.drawThreshold - 1;
      }).map((item) => ({ id: item.id, kind: "label", px: network.body.nodes[item.id].options.font.size * scale }));
      return own.concat(landmarks.placed().map((l) => Object.assign({ kind: "landmark" }, l)));
    },
    outline: () => ({ shown: !outlineEl.hidden, entries: outline.entries() }),
  };

  post("streamlit:componentReady", { apiVersion: 1 });
})();
