// The outline: the map's tree as an indented list beside the map (issue 43). A tree of a few hundred
// questions cannot be shown whole on the canvas with labels anyone can read (its leaves stack 135 px
// apart; the whole of 300 nodes fits a 600 px map only at 2 px text); a list of entries of up to two
// lines shows 15-30 of them at 13 px and scrolls. It opens as deep as about OPEN_ROWS entries allow,
// deeper branches folded with their "+N" counts; a search shows the matches with the way to them.
// A click on an entry chooses the node as a click on the map does (`onChoose`).
// Every text here is the run's (untrusted): it goes through textContent and `title` only.
"use strict";

window.thoughtmapOutline = function (el, onChoose, below) { // below(id, kids): every node under id
  const OPEN_ROWS = 40; // the automatic opening stops before the list passes this many entries
  const INDENT_PX = 14;
  let items = new Map(); // id -> the item as the page sent it (number, text, tip, parent, color)
  let kids = new Map(); // id -> child ids, in the map's order
  let roots = [];
  const open = new Set(); // entries whose children are listed
  let touched = false; // the reader folded or unfolded an entry: the opening is theirs from then on
  let matchesOf = null; // the search's matches (a Set of ids) while a search is typed
  let selected = null;
  let shownSelection = null; // the selection the list last scrolled to

  function openByLevels() {
    // As many whole levels as fit in OPEN_ROWS entries (the roots' children always).
    open.clear();
    let level = roots.slice();
    let rows = level.length;
    let first = true;
    while (level.length) {
      const nextLevel = level.flatMap((id) => kids.get(id) || []);
      if (!nextLevel.length || (!first && rows + nextLevel.length > OPEN_ROWS)) break;
      level.forEach((id) => { if ((kids.get(id) || []).length) open.add(id); });
      rows += nextLevel.length;
      level = nextLevel;
      first = false;
    }
  }

  function update(newItems, newKids) {
    items = newItems;
    kids = newKids;
    roots = [...items.values()].filter((i) => i.parent === null || !items.has(i.parent)).map((i) => i.id);
    for (const id of [...open]) if (!items.has(id)) open.delete(id);
    if (!touched) openByLevels();
    if (selected !== null && items.has(selected)) reveal(selected);
    if (!el.hidden) draw();
  }

  function rowsToShow() {
    // [id, depth] in the list's order: the tree as opened, or the matches with their ancestors.
    const out = [];
    let keep = null;
    if (matchesOf) {
      keep = new Set();
      for (const id of matchesOf) {
        const seen = new Set();
        for (let at = id; at !== null && items.has(at) && !seen.has(at); at = items.get(at).parent) {
          seen.add(at);
          keep.add(at);
        }
      }
    }
    const stack = roots.slice().reverse().map((id) => [id, 0]);
    const seen = new Set();
    while (stack.length) {
      const [id, depth] = stack.pop();
      if (seen.has(id) || (keep && !keep.has(id))) continue;
      seen.add(id);
      out.push([id, depth]);
      if (keep || open.has(id)) {
        const under = kids.get(id) || [];
        for (let i = under.length - 1; i >= 0; i--) stack.push([under[i], depth + 1]);
      }
    }
    return out;
  }

  function row(id, depth) {
    const item = items.get(id);
    const children = (kids.get(id) || []).length;
    const listed = matchesOf !== null || open.has(id);
    const entry = document.createElement("div");
    entry.className = "entry" + (id === selected ? " selected" : "") + (matchesOf && matchesOf.has(id) ? " match" : "");
    entry.setAttribute("role", "treeitem");
    entry.setAttribute("aria-level", String(depth + 1));
    entry.setAttribute("aria-selected", String(id === selected));
    entry.dataset.id = id;
    entry.style.paddingLeft = 4 + depth * INDENT_PX + "px";
    entry.title = item.tip || item.text;
    const twisty = document.createElement("button");
    twisty.type = "button";
    twisty.className = "twisty";
    if (children && matchesOf === null) {
      entry.setAttribute("aria-expanded", String(listed));
      twisty.textContent = listed ? "▾" : "▸";
      twisty.setAttribute("aria-label", (listed ? "Fold #" : "Unfold #") + item.number);
    } else {
      twisty.disabled = true;
      twisty.setAttribute("aria-hidden", "true");
    }
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = item.color.background;
    swatch.style.borderColor = item.color.border;
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = "#" + item.number + " " + item.text;
    entry.append(twisty, swatch, text);
    if (children && !listed) {
      const more = document.createElement("span");
      more.className = "more";
      more.textContent = "+" + below(id, kids).length;
      entry.appendChild(more);
    }
    return entry;
  }

  function draw() {
    const top = el.scrollTop;
    const list = document.createDocumentFragment();
    for (const [id, depth] of rowsToShow()) list.appendChild(row(id, depth));
    el.replaceChildren(list);
    el.scrollTop = top;
    if (selected !== shownSelection) {
      shownSelection = selected;
      const entry = selected !== null ? el.querySelector('[data-id="' + CSS.escape(selected) + '"]') : null;
      if (entry) entry.scrollIntoView({ block: "nearest" });
    }
  }

  el.addEventListener("click", function (event) {
    const entry = event.target.closest(".entry");
    if (!entry) return;
    const id = entry.dataset.id;
    if (event.target.closest(".twisty")) {
      if (open.has(id)) open.delete(id); else open.add(id);
      touched = true;
      draw();
      return;
    }
    onChoose(id);
  });

  return {
    update: update,
    draw: draw,
    select: function (id) { // the node selected on the map: marked here, its entry listed and in sight
      selected = id;
      if (id !== null && items.has(id)) reveal(id);
      if (!el.hidden) draw();
    },
    search: function (ids) { matchesOf = ids; if (!el.hidden) draw(); }, // null ends the search
    reveal: reveal,
    entries: function () { // for the browser tests: what the list shows
      return [...el.querySelectorAll(".entry")].map((e) => ({
        id: e.dataset.id, text: e.querySelector(".text").textContent, level: Number(e.getAttribute("aria-level")),
        more: e.querySelector(".more") ? e.querySelector(".more").textContent : "",
        selected: e.classList.contains("selected"),
      }));
    },
  };

  function reveal(id) {
    // The entry's ancestors opened, so it is listed.
    const seen = new Set();
    for (let p = items.get(id).parent; p !== null && items.has(p) && !seen.has(p); p = items.get(p).parent) {
      seen.add(p);
      open.add(p);
    }
  }
};
