// The knowledge graph's frame (components/knowledge_graph.py): entities as dots, relations as
// labelled edges, one vis-network Network for the life of the iframe, fed by Streamlit's component
// messages. The entities and relations are model text: they only ever go through textContent or
// vis's canvas text (labels), never innerHTML and never vis's `title`; nothing here navigates, and
// nothing is sent back to the page (the drawing is read only).
"use strict";

(function () {
  const root = document.getElementById("root");
  const graphEl = document.getElementById("graph");
  const tooltip = document.getElementById("tooltip");
  const details = document.getElementById("details");
  const legendEl = document.getElementById("legend");
  const findEl = document.getElementById("find");
  const findStatus = document.getElementById("find-status");

  const nodes = new vis.DataSet();
  const edges = new vis.DataSet();
  const items = new Map(); // id -> the entity as the page sent it (label, tip, name, ...)
  const edgeItems = new Map();
  const shownNodes = new Map(); // id -> JSON of what vis has, to send only changes
  const shownEdges = new Map();
  let network = null;
  let frameHeight = 0;
  let focus = [];
  let minScale = 0.75;
  let lastFocus = "";
  let lastLegend = "";
  let settling = false; // physics runs until the new entities have found their places
  let renders = 0;
  let find = { query: "", index: -1 };

  function post(type, extra) {
    window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type: type }, extra), "*");
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent || !event.data || event.data.type !== "streamlit:render") return;
    render(event.data.args || {});
  });

  // ------------------------------------------------------------------ data

  function strip(item) {
    const shown = Object.assign({}, item);
    delete shown.tip; delete shown.name; delete shown.details;
    return shown;
  }

  function sync(dataset, want, shown) {
    // Only what changed reaches vis, so a new highlight does not move what is drawn. True when an
    // item came or went: the layout makes room for it.
    const next = new Map(want.map((w) => [w.id, JSON.stringify(w)]));
    const gone = [...shown.keys()].filter((id) => !next.has(id));
    const fresh = want.filter((w) => shown.get(w.id) !== next.get(w.id));
    const added = fresh.some((w) => !shown.has(w.id));
    if (gone.length) dataset.remove(gone);
    if (fresh.length) dataset.update(fresh);
    shown.clear();
    next.forEach((json, id) => shown.set(id, json));
    return added || gone.length > 0;
  }

  function setHeight(height) {
    // As tall as the page asks: Streamlit sizes the iframe from this message.
    if (!height || height === frameHeight) return;
    frameHeight = height;
    root.style.height = height + "px";
    post("streamlit:setFrameHeight", { height: height });
  }

  function render(args) {
    setHeight(args.height);
    minScale = typeof args.minScale === "number" ? args.minScale : minScale;
    if (network === null) create(args.options || {});
    items.clear();
    for (const n of args.nodes || []) items.set(n.id, n);
    edgeItems.clear();
    for (const e of args.edges || []) edgeItems.set(e.id, e);
    const moved = sync(nodes, [...items.values()].map(strip), shownNodes);
    const rewired = sync(edges, [...edgeItems.values()].map(strip), shownEdges);
    focus = (args.focus || []).filter((id) => items.has(id));
    const focusKey = JSON.stringify(focus);
    if (moved || rewired) settle();
    else if (focusKey !== lastFocus) frame(true);
    lastFocus = focusKey;
    legend(args.legend || []);
    if (details.dataset.id && !items.has(details.dataset.id)) hideDetails();
    renders += 1;
  }

  function create(options) {
    network = new vis.Network(graphEl, { nodes: nodes, edges: edges }, options);
    network.on("stabilizationIterationsDone", function () {
      // Still once placed: a reader's drag moves one entity, not the whole drawing.
      network.setOptions({ physics: { enabled: false } });
      settling = false;
      frame(false);
    });
    network.on("hoverNode", (p) => showTip(items.get(String(p.node)), p.pointer.DOM));
    network.on("blurNode", hideTip);
    network.on("hoverEdge", (p) => showTip(edgeItems.get(String(p.edge)), p.pointer.DOM));
    network.on("blurEdge", hideTip);
    network.on("dragStart", hideTip);
    network.on("click", function (p) {
      if (p.nodes.length) showDetails(String(p.nodes[0]));
      else hideDetails();
    });
  }

  function settle() {
    // New entities find their places with physics on; then it stops (stabilizationIterationsDone).
    settling = true;
    network.setOptions({ physics: { enabled: true } });
    network.stabilize(250);
  }

  function frame(animate) {
    // The view opens on the highlighted entities (with none, the whole drawing), at a scale where the
    // names are legible: centred on them, zoomed out no further than minScale (Fit shows it all).
    if (!network || settling) return;
    network.fit({ nodes: focus.length ? focus : undefined, animation: false });
    const scale = Math.min(Math.max(network.getScale(), minScale), 1.2); // one entity is not a close-up
    network.moveTo({ scale: scale, animation: animate ? { duration: 300 } : false });
  }

  // ------------------------------------------------------------------ text (textContent only)

  function showTip(item, at) {
    if (!item || !item.tip) return;
    tooltip.textContent = item.tip;
    tooltip.hidden = false;
    const left = Math.min(at.x + 14, graphEl.clientWidth - tooltip.offsetWidth - 6);
    const top = at.y + 18 + tooltip.offsetHeight > graphEl.clientHeight ? at.y - tooltip.offsetHeight - 10 : at.y + 18;
    tooltip.style.left = Math.max(4, left) + "px";
    tooltip.style.top = Math.max(4, top) + "px";
  }

  function hideTip() { tooltip.hidden = true; }

  function showDetails(id) {
    const item = items.get(id);
    if (!item) return hideDetails();
    details.replaceChildren();
    const name = document.createElement("div");
    name.className = "name";
    name.textContent = item.name;
    const body = document.createElement("div");
    body.textContent = item.details || "";
    details.append(name, body);
    details.dataset.id = id;
    details.hidden = false;
  }

  function hideDetails() {
    details.hidden = true;
    delete details.dataset.id;
  }

  function legend(entries) {
    const json = JSON.stringify(entries);
    if (json === lastLegend) return;
    lastLegend = json;
    legendEl.replaceChildren();
    for (const entry of entries) {
      const row = document.createElement("div");
      row.className = "item";
      const mark = document.createElement("span");
      if (entry.kind === "edge") {
        mark.className = "line";
        mark.style.borderTopColor = entry.colour;
      } else {
        mark.className = "swatch";
        mark.style.background = entry.colour;
        mark.style.borderColor = entry.border || entry.colour;
      }
      const words = document.createElement("span");
      words.textContent = entry.text;
      row.append(mark, words);
      legendEl.appendChild(row);
    }
    legendEl.hidden = !entries.length;
  }

  // ------------------------------------------------------------------ tools

  function findNext() {
    const query = findEl.value.trim().toLowerCase();
    if (!query) { findStatus.textContent = ""; find = { query: "", index: -1 }; return; }
    const matches = [...items.values()].filter((n) => n.name.toLowerCase().includes(query)).map((n) => n.id);
    if (!matches.length) { findStatus.textContent = "none"; return; }
    find.index = query === find.query ? (find.index + 1) % matches.length : 0;
    find.query = query;
    const id = matches[find.index];
    findStatus.textContent = (find.index + 1) + "/" + matches.length;
    network.selectNodes([id]);
    network.focus(id, { scale: Math.max(network.getScale(), 1.2), animation: { duration: 300 } });
    showDetails(id);
  }

  findEl.addEventListener("keydown", function (event) { if (event.key === "Enter") findNext(); });
  document.getElementById("fit").addEventListener("click", function () {
    network.fit({ animation: { duration: 300 } });
  });
  document.getElementById("zoom-in").addEventListener("click", function () {
    network.moveTo({ scale: network.getScale() * 1.3, animation: { duration: 150 } });
  });
  document.getElementById("zoom-out").addEventListener("click", function () {
    network.moveTo({ scale: network.getScale() / 1.3, animation: { duration: 150 } });
  });
  document.getElementById("fullscreen").addEventListener("click", function () {
    if (document.fullscreenElement) document.exitFullscreen();
    else if (root.requestFullscreen) root.requestFullscreen();
  });
  document.addEventListener("fullscreenchange", function () {
    root.style.height = document.fullscreenElement ? "" : frameHeight + "px";
    setTimeout(() => frame(false), 50);
  });

  // ------------------------------------------------------------------ a hook for the browser tests

  window.__knowledgeGraph = {
    get network() { return network; },
    renders: () => renders,
    settled: () => network !== null && !settling,
    scale: () => network.getScale(),
    focus: () => focus.slice(),
    // Each entity as drawn: its label, role (cited, used, other), centre in CSS pixels, in view or not, and
    // its label's size on screen.
    nodes: function () {
      const scale = network.getScale();
      return [...items.values()].map(function (item) {
        const at = network.getPositions([item.id])[item.id];
        const dom = at ? network.canvasToDOM(at) : { x: NaN, y: NaN };
        return {
          id: item.id, name: item.name, label: item.label, role: item.role, x: dom.x, y: dom.y,
          inView: dom.x >= 0 && dom.y >= 0 && dom.x <= graphEl.clientWidth && dom.y <= graphEl.clientHeight,
          fontPx: item.font.size * scale,
        };
      });
    },
    edges: () => [...edgeItems.values()].map((e) => ({ id: e.id, from: e.from, to: e.to, label: e.label || "",
                                                        focus: Boolean(e.focus) })),
  };

  post("streamlit:componentReady", { apiVersion: 1 });
})();
