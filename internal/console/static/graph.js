// Drover console: a flow's task graph, laid out by the server
// (internal/console/layout.go), drawn as SVG with zoom and pan.
//
// Big flows stay fast: only the tasks inside the view are elements of
// their own, with their names once they are large enough to read; when
// more than maxNodes would be, the tasks are drawn as one path per state.
// Edges are one path. Task ids are put in with textContent.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const maxNodes = 1500; // tasks drawn one by one
  const labelZoom = 0.45; // names from this zoom on
  const cell = 200; // hit-test grid, in graph pixels

  function el(name, attrs) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  function start() {
    const box = document.getElementById("graph");
    if (!box) return;
    const src = box.dataset.src;
    if (!src || !src.startsWith("/ui/")) return;
    fetch(src, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(r.status + " " + r.statusText))))
      .then((g) => draw(box, g))
      .catch((err) => {
        const p = document.createElement("p");
        p.className = "err";
        p.textContent = "The graph cannot be loaded: " + err.message;
        box.replaceChildren(p);
      });
  }

  function draw(box, g) {
    const n = g.ids.length;
    const nw = g.nw, nh = g.nh;
    const state = new Int8Array(n), attempts = new Int32Array(n), errs = new Array(n).fill("");
    (g.tasks || []).forEach((t, i) => { state[i] = t[0]; attempts[i] = t[1]; errs[i] = t[2] || ""; });

    // A grid of the tasks for hit tests and for finding those in view.
    const grid = new Map();
    for (let i = 0; i < n; i++) {
      const k = Math.floor(g.x[i] / cell) + "," + Math.floor(g.y[i] / cell);
      let l = grid.get(k);
      if (!l) grid.set(k, (l = []));
      l.push(i);
    }

    const svg = el("svg", { id: "graph-svg", role: "img", "aria-label": "task graph of " + n + " tasks" });
    const vp = el("g", { class: "viewport" });
    const edges = el("path", { class: "edges", "vector-effect": "non-scaling-stroke" });
    const nodes = el("g", { class: "nodes" });
    vp.append(edges, nodes);
    svg.appendChild(vp);
    box.replaceChildren(svg);

    let d = "";
    for (const e of g.edges) {
      const f = e[0], t = e[1];
      let x = g.x[f] + nw, y = g.y[f] + nh / 2;
      d += "M" + x + " " + y;
      for (let j = 2; j + 1 < e.length; j += 2) {
        const px = e[j] - nw / 2, py = e[j + 1];
        d += "C" + (x + 40) + " " + y + " " + (px - 40) + " " + py + " " + px + " " + py + "h" + nw;
        x = px + nw; y = py;
      }
      const tx = g.x[t], ty = g.y[t] + nh / 2;
      d += "C" + (x + 40) + " " + y + " " + (tx - 40) + " " + ty + " " + tx + " " + ty;
    }
    edges.setAttribute("d", d);

    let k = 1, tx = 0, ty = 0;
    function fit() {
      const w = box.clientWidth || 800, h = box.clientHeight || 500;
      k = Math.min(w / Math.max(g.w, 1), h / Math.max(g.h, 1), 1.5);
      tx = (w - g.w * k) / 2;
      ty = Math.max(0, (h - g.h * k) / 2);
    }

    let pending = false;
    function schedule() {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; render(); });
    }

    // visible is the tasks in view. It walks the grid's cells in the view
    // within the graph, or the grid's own cells when they are fewer:
    // zoomed out to fit a long, flat graph, the view is mostly empty space
    // (for 100,000 tasks, walking it was 15 million cells, half a minute a
    // frame).
    function visible() {
      const w = box.clientWidth || 800, h = box.clientHeight || 500;
      const x0 = Math.max((-tx) / k - nw, 0), y0 = Math.max((-ty) / k - nh, 0);
      const x1 = Math.min((w - tx) / k, g.w), y1 = Math.min((h - ty) / k, g.h);
      const out = [];
      const keep = (l) => {
        for (const i of l) {
          if (g.x[i] + nw >= x0 && g.x[i] <= x1 && g.y[i] + nh >= y0 && g.y[i] <= y1) out.push(i);
        }
      };
      const gx0 = Math.floor(x0 / cell), gx1 = Math.floor(x1 / cell), gy0 = Math.floor(y0 / cell), gy1 = Math.floor(y1 / cell);
      let cells = 0;
      if ((gx1 - gx0 + 1) * (gy1 - gy0 + 1) > grid.size) {
        for (const l of grid.values()) keep(l);
        cells = grid.size;
      } else {
        for (let gx = gx0; gx <= gx1; gx++) {
          for (let gy = gy0; gy <= gy1; gy++) {
            cells++;
            const l = grid.get(gx + "," + gy);
            if (l) keep(l);
          }
        }
      }
      box.dataset.cells = String(cells); // what a frame walked, for tests
      box.dataset.drawn = String(out.length);
      return out;
    }

    function render() {
      vp.setAttribute("transform", "translate(" + tx + " " + ty + ") scale(" + k + ")");
      const vis = visible();
      const frag = document.createDocumentFragment();
      if (vis.length > maxNodes) {
        // One path per state: thousands of tasks as a handful of elements.
        const paths = new Map();
        for (const i of vis) {
          const s = state[i];
          paths.set(s, (paths.get(s) || "") + "M" + g.x[i] + " " + g.y[i] + "h" + nw + "v" + nh + "h" + -nw + "z");
        }
        for (const [s, pd] of paths) frag.appendChild(el("path", { class: "agg st-" + g.states[s], d: pd }));
        nodes.setAttribute("class", "nodes dense");
      } else {
        const labels = k >= labelZoom;
        for (const i of vis) {
          const gr = el("g", { class: "node st-" + g.states[state[i]], transform: "translate(" + g.x[i] + " " + g.y[i] + ")" });
          gr.dataset.task = g.ids[i];
          gr.dataset.state = g.states[state[i]];
          gr.appendChild(el("rect", { width: nw, height: nh, rx: 4 }));
          const title = el("title");
          title.textContent = g.ids[i] + ": " + g.states[state[i]] + (attempts[i] ? ", " + attempts[i] + " attempts" : "") + (errs[i] ? ", " + errs[i] : "");
          gr.appendChild(title);
          if (labels) {
            const t = el("text", { x: 8, y: nh / 2 + 4 });
            const id = g.ids[i];
            t.textContent = id.length > 22 ? id.slice(0, 21) + "…" : id;
            gr.appendChild(t);
            if (attempts[i] > 1) {
              const a = el("text", { x: nw - 6, y: nh / 2 + 4, class: "count" });
              a.textContent = "×" + attempts[i];
              gr.appendChild(a);
            }
          }
          frag.appendChild(gr);
        }
        nodes.setAttribute("class", "nodes");
      }
      nodes.replaceChildren(frag);
    }

    function zoomAt(f, cx, cy) {
      const nk = Math.min(4, Math.max(0.01, k * f));
      tx = cx - (cx - tx) * (nk / k);
      ty = cy - (cy - ty) * (nk / k);
      k = nk;
      schedule();
    }

    svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = svg.getBoundingClientRect();
      zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });

    let drag = null, moved = false;
    svg.addEventListener("pointerdown", (e) => {
      drag = { x: e.clientX, y: e.clientY, tx, ty };
      moved = false;
      svg.setPointerCapture(e.pointerId);
    });
    svg.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) moved = true;
      tx = drag.tx + dx; ty = drag.ty + dy;
      schedule();
    });
    svg.addEventListener("pointerup", (e) => {
      const wasDrag = moved;
      drag = null;
      if (!wasDrag) pick(e);
    });

    const info = document.getElementById("graph-info");
    function pick(e) {
      const r = svg.getBoundingClientRect();
      const x = (e.clientX - r.left - tx) / k, y = (e.clientY - r.top - ty) / k;
      const l = grid.get(Math.floor(x / cell) + "," + Math.floor(y / cell)) || [];
      const near = [];
      for (let gx = -1; gx <= 0; gx++) for (let gy = -1; gy <= 0; gy++) {
        near.push(...(grid.get((Math.floor(x / cell) + gx) + "," + (Math.floor(y / cell) + gy)) || []));
      }
      const hit = l.concat(near).find((i) => x >= g.x[i] && x <= g.x[i] + nw && y >= g.y[i] && y <= g.y[i] + nh);
      if (hit === undefined || !info) return;
      show(hit);
    }

    function show(i) {
      const id = g.ids[i];
      const h = document.createElement("h3");
      h.textContent = id;
      const p = document.createElement("p");
      p.textContent = g.states[state[i]] + (attempts[i] ? " · " + attempts[i] + " attempt" + (attempts[i] > 1 ? "s" : "") : "") + (errs[i] ? " · " + errs[i] : "");
      const a = document.createElement("a");
      a.href = g.href + encodeURIComponent(id);
      a.textContent = "task details";
      const b = document.createElement("a");
      b.href = "?task=" + encodeURIComponent(id);
      b.textContent = "in the table";
      const links = document.createElement("p");
      links.append(a, " · ", b);
      info.replaceChildren(h, p, links);
      info.hidden = false;
    }

    for (const b of document.querySelectorAll("[data-zoom]")) {
      b.addEventListener("click", () => {
        const w = box.clientWidth, h = box.clientHeight;
        if (b.dataset.zoom === "fit") { fit(); schedule(); }
        else zoomAt(b.dataset.zoom === "in" ? 1.5 : 1 / 1.5, w / 2, h / 2);
      });
    }
    box.addEventListener("keydown", (e) => {
      const step = 60;
      if (e.key === "+" || e.key === "=") zoomAt(1.25, box.clientWidth / 2, box.clientHeight / 2);
      else if (e.key === "-") zoomAt(0.8, box.clientWidth / 2, box.clientHeight / 2);
      else if (e.key === "ArrowLeft") { tx += step; schedule(); }
      else if (e.key === "ArrowRight") { tx -= step; schedule(); }
      else if (e.key === "ArrowUp") { ty += step; schedule(); }
      else if (e.key === "ArrowDown") { ty -= step; schedule(); }
      else return;
      e.preventDefault();
    });

    function update(m) {
      for (const t of m) {
        const i = t[0];
        if (i >= 0 && i < n) { state[i] = t[1]; attempts[i] = t[2]; errs[i] = t[3] || ""; }
      }
    }
    for (const m of window.droverTaskLog || []) update(m);
    window.droverTaskLog = null;
    document.addEventListener("drover:tasks", (e) => { update(e.detail); schedule(); });
    window.addEventListener("resize", schedule);

    fit();
    render();
    box.dataset.ready = "1";
    document.dispatchEvent(new CustomEvent("drover:graph-ready"));
  }

  document.addEventListener("DOMContentLoaded", start);
})();
