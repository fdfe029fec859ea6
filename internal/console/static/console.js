// Drover console: live updates of server-rendered pages.
//
// Every piece of data arrives as JSON from the page's event stream and
// goes into the page with textContent or attributes the script chose:
// never as markup, never as a URL it did not check. Rows and fields are the
// same cells the server renders (internal/console/views.go).
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";

  // Only the console's own pages are linked to.
  function safeHref(h) {
    return typeof h === "string" && h.startsWith("/ui/") && !h.startsWith("//") ? h : null;
  }

  function age(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 48 * 3600) return Math.floor(s / 3600) + "h";
    return Math.floor(s / 86400) + "d";
  }

  // fillCell makes el show cell c: its bar, then its link or text.
  function fillCell(el, c) {
    el.replaceChildren();
    el.className = c.c || "";
    if (c.ti) el.title = c.ti; else el.removeAttribute("title");
    if (c.s) el.dataset.since = String(c.s); else delete el.dataset.since;
    if (c.u) el.dataset.until = String(c.u); else delete el.dataset.until;
    if (c.b && c.b.length) {
      const svg = document.createElementNS(SVG, "svg");
      svg.setAttribute("class", "bar");
      svg.setAttribute("viewBox", "0 0 100 10");
      svg.setAttribute("preserveAspectRatio", "none");
      svg.setAttribute("aria-hidden", "true");
      for (const seg of c.b) {
        const r = document.createElementNS(SVG, "rect");
        r.setAttribute("class", String(seg.c));
        r.setAttribute("x", String(Number(seg.x) || 0));
        r.setAttribute("y", "0");
        r.setAttribute("width", String(Number(seg.w) || 0));
        r.setAttribute("height", "10");
        if (seg.t) {
          const t = document.createElementNS(SVG, "title");
          t.textContent = seg.t;
          r.appendChild(t);
        }
        svg.appendChild(r);
      }
      el.appendChild(svg);
    }
    const href = safeHref(c.h);
    if (href) {
      const a = document.createElement("a");
      a.href = href;
      a.textContent = c.t || "";
      el.appendChild(a);
    } else if (c.t) {
      const span = document.createElement("span");
      span.textContent = c.t;
      el.appendChild(span);
    }
  }

  function makeRow(r) {
    const tr = document.createElement("tr");
    tr.dataset.k = r.k;
    tr.dataset.i = String(r.i || 0);
    if (r.c) tr.className = r.c;
    for (const c of r.cells) {
      const td = document.createElement("td");
      fillCell(td, c);
      tr.appendChild(td);
    }
    return tr;
  }

  function findRow(body, key) {
    for (const tr of body.rows) if (tr.dataset.k === key) return tr;
    return null;
  }

  function applyRows(m) {
    const table = document.querySelector('table[data-live-table="' + CSS.escape(m.t) + '"]');
    if (!table) return;
    const body = table.tBodies[0];
    const keep = new Set();
    for (const r of m.rows || []) {
      keep.add(r.k);
      const tr = makeRow(r);
      const old = findRow(body, r.k);
      if (old) {
        old.replaceWith(tr);
        flash(tr);
      } else if (m.prepend) {
        body.insertBefore(tr, body.firstChild);
        flash(tr);
      } else {
        body.appendChild(tr);
      }
    }
    for (const k of m.remove || []) {
      const old = findRow(body, k);
      if (old) old.remove();
    }
    if (m.replace) {
      for (const tr of Array.from(body.rows)) if (!keep.has(tr.dataset.k)) tr.remove();
    }
    if (m.order) {
      for (const k of m.order) {
        const tr = findRow(body, k);
        if (tr) body.appendChild(tr);
      }
    }
    const empty = document.getElementById("no-flows");
    if (empty && body.rows.length) empty.hidden = true;
  }

  function flash(el) {
    el.classList.add("changed");
    setTimeout(() => el.classList.remove("changed"), 1200);
  }

  function applyFields(m) {
    for (const [name, c] of Object.entries(m)) {
      for (const el of document.querySelectorAll('[data-f="' + CSS.escape(name) + '"]')) {
        fillCell(el, c);
      }
    }
  }

  function notice(text) {
    const p = document.getElementById("notice");
    if (!p) return;
    p.textContent = text;
    p.hidden = false;
  }

  // Output: text appended as text nodes, the oldest trimmed past a bound.
  const maxOutput = 2 << 20;
  let outputLen = 0;
  function applyOutput(pieces) {
    const pre = document.getElementById("output");
    if (!pre) return;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    for (const p of pieces) {
      const span = document.createElement("span");
      span.className = "out-" + (p.s === "stderr" ? "stderr" : "stdout");
      span.textContent = p.t;
      pre.appendChild(span);
      outputLen += p.t.length;
    }
    while (outputLen > maxOutput && pre.firstChild) {
      outputLen -= (pre.firstChild.textContent || "").length;
      pre.firstChild.remove();
    }
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function refreshAges() {
    const now = Date.now();
    for (const el of document.querySelectorAll("[data-since]")) {
      const t = Number(el.dataset.since);
      const target = el.querySelector("a, span") || el;
      if (t) target.textContent = age(now - t);
    }
    // A countdown, as views.go's left words it.
    for (const el of document.querySelectorAll("[data-until]")) {
      const t = Number(el.dataset.until);
      const target = el.querySelector("a, span") || el;
      if (t) target.textContent = t > now ? age(t - now) + " left" : "ended";
    }
  }

  window.droverTaskLog = [];

  function connect() {
    const url = document.body.dataset.live;
    if (!url || !safeHref(url) || !window.EventSource) return;
    const dot = document.getElementById("live-state");
    const es = new EventSource(url);
    window.droverLive = es;
    es.addEventListener("open", () => {
      if (dot) { dot.classList.add("on"); dot.title = "live"; }
      // A stream starts from the first chunk again after a reconnect.
      const pre = document.getElementById("output");
      if (pre && pre.dataset.stream) { pre.replaceChildren(); outputLen = 0; }
    });
    es.addEventListener("error", () => {
      if (dot) { dot.classList.remove("on"); dot.title = "reconnecting"; }
    });
    es.addEventListener("rows", (e) => applyRows(JSON.parse(e.data)));
    es.addEventListener("fields", (e) => applyFields(JSON.parse(e.data)));
    es.addEventListener("tasks", (e) => {
      const m = JSON.parse(e.data);
      // Kept for a graph that is still loading (graph.js replays them).
      if (window.droverTaskLog) window.droverTaskLog.push(m);
      document.dispatchEvent(new CustomEvent("drover:tasks", { detail: m }));
    });
    es.addEventListener("output", (e) => applyOutput(JSON.parse(e.data)));
    es.addEventListener("notice", (e) => notice(JSON.parse(e.data).t || ""));
    es.addEventListener("end", (e) => {
      es.close();
      if (dot) { dot.classList.remove("on"); dot.title = "ended"; }
      const st = document.getElementById("output-state");
      if (st) st.textContent = "ended";
      const text = JSON.parse(e.data).t;
      if (text) notice(text);
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    connect();
    refreshAges();
    setInterval(refreshAges, 10000);
  });
})();
