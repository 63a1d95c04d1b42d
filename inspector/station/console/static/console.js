// The operator console: one EventSource, plain DOM, a canvas for the frame and its glimpses.
"use strict";
(function () {
  const MAX_ROWS = 40;
  const RENDER_MS = 200;
  const state = { info: null, parts: new Map(), order: [], review: [], selected: null,
                  follow: true, loading: null, pendingFrame: null };
  // Measured by benchmarks: seconds from the station handing a part over to this page.
  const probe = { latencies: [], parts: 0 };
  window.inspectorConsole = probe;
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    if (text !== undefined) e.textContent = text;
    return e;
  };

  const opInput = $("operator");
  opInput.value = window.localStorage.getItem("inspector.operator") || "";
  opInput.addEventListener("change", () => {
    window.localStorage.setItem("inspector.operator", opInput.value.trim());
  });

  $("follow").addEventListener("click", () => { setFollow(!state.follow); });
  function setFollow(on) {
    state.follow = on;
    $("follow").className = on ? "on" : "";
    $("follow").textContent = on ? "following live" : "follow live";
    if (on && state.order.length) select(state.order[state.order.length - 1]);
  }

  function say(text, bad) {
    const m = $("message");
    m.textContent = text;
    m.className = bad ? "note alarm" : "note";
  }

  function pill(id, text, kind) {
    const p = $(id);
    p.textContent = text;
    p.className = "pill" + (kind ? " " + kind : "");
  }

  function verdictText(d) {
    if (d.error) return "error: " + d.error;
    return d.label + " (" + d.verdict + ", " + (100 * d.confidence).toFixed(1) + " %)";
  }

  function buttons(d) {
    const box = el("span", { class: "buttons" });
    if (!state.info || !d.has_frame) return box;
    for (const c of state.info.classes) {
      const b = el("button", { type: "button", "data-id": d.id, "data-label": c,
                               class: "fb" + (c === d.label ? " confirm" : "") },
                   c === d.label ? "\u2713 " + c : c);
      if (d.feedback && d.feedback.label === c) b.classList.add("chosen");
      if (!state.info.feedback) b.disabled = true;
      box.appendChild(b);
    }
    return box;
  }

  function row(d) {
    const tr = el("tr", { class: "part", "data-id": d.id });
    const t = new Date(1000 * (d.decided_at || d.offered_at));
    tr.appendChild(el("td", {}, t.toLocaleTimeString()));
    tr.appendChild(el("td", {}, d.part_id));
    tr.appendChild(el("td", { class: d.error ? "error" : d.verdict }, d.error ? "error" : d.label));
    tr.appendChild(el("td", {}, d.confidence == null ? "-" : d.confidence.toFixed(2)));
    const fb = el("td");
    fb.appendChild(buttons(d));
    if (d.review) fb.appendChild(el("span", { class: "note" }, " " + d.review));
    tr.appendChild(fb);
    if (d.id === state.selected) tr.classList.add("selected");
    return tr;
  }

  function renderRecent() {
    const body = $("recent");
    const rows = state.order.slice(-MAX_ROWS).reverse().map((id) => row(state.parts.get(id)));
    body.replaceChildren(...rows);
  }

  function renderReview() {
    $("review").replaceChildren(...state.review.map(row));
    pill("review-n", String(state.review.length), state.review.length ? "warn" : "");
  }

  function renderSelected() {
    const d = state.parts.get(state.selected) || state.review.find((r) => r.id === state.selected);
    if (!d) return;
    $("sel-part").textContent = d.part_id;
    const v = $("sel-verdict");
    v.textContent = verdictText(d);
    v.className = "verdict " + (d.error ? "error" : d.verdict);
    $("sel-buttons").replaceChildren(...buttons(d).childNodes);
    $("sel-feedback").textContent = d.feedback
      ? "operator " + d.feedback.operator + ": " + d.feedback.action + " as " + d.feedback.label +
        (d.feedback.outcome ? " (" + d.feedback.outcome + ")" : "")
      : (d.review ? "review: " + d.review : "");
    loadFrame(d);
  }

  function loadFrame(d) {
    if (!d.has_frame) { clearCanvas(); return; }
    if (state.loading) { state.pendingFrame = d; return; }
    const img = new Image();
    state.loading = d.id;
    img.onload = () => { draw(img, d); done(); };
    img.onerror = () => { done(); };
    img.src = "/frame/" + encodeURIComponent(d.id) + ".jpg";
    function done() {
      state.loading = null;
      const next = state.pendingFrame;
      state.pendingFrame = null;
      if (next && next.id !== d.id) loadFrame(next);
    }
  }

  function clearCanvas() {
    const c = $("frame");
    c.getContext("2d").clearRect(0, 0, c.width, c.height);
  }

  function draw(img, d) {
    const c = $("frame");
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    const W = c.width, H = c.height;
    g.lineWidth = Math.max(1.5, W / 300);
    g.font = Math.round(Math.max(11, W / 40)) + "px system-ui, sans-serif";
    let prev = null;
    d.glimpses.forEach((b, i) => {
      const [x, y, w, h] = [b[0] * W, b[1] * H, b[2] * W, b[3] * H];
      const last = i === d.glimpses.length - 1;
      g.strokeStyle = last ? (d.verdict === "ok" ? "#2ecc71" : "#ff4d4d") : "rgba(255,214,0,0.9)";
      g.strokeRect(x, y, w, h);
      g.fillStyle = g.strokeStyle;
      g.fillText(String(i + 1), x + 3, y + Math.max(12, W / 40));
      const cx = x + w / 2, cy = y + h / 2;
      if (prev) {
        g.beginPath(); g.moveTo(prev[0], prev[1]); g.lineTo(cx, cy);
        g.strokeStyle = "rgba(0,200,255,0.8)"; g.stroke();
      }
      prev = [cx, cy];
    });
  }

  function select(id) {
    state.selected = id;
    for (const tr of document.querySelectorAll("tr.part")) {
      tr.classList.toggle("selected", tr.getAttribute("data-id") === id);
    }
    renderSelected();
  }

  document.addEventListener("click", (ev) => {
    const b = ev.target.closest("button.fb");
    if (b) { ev.stopPropagation(); sendFeedback(b.getAttribute("data-id"), b.getAttribute("data-label")); return; }
    const tr = ev.target.closest("tr.part");
    if (tr) { setFollow(false); select(tr.getAttribute("data-id")); }
  });

  async function sendFeedback(id, label) {
    const operator = opInput.value.trim();
    if (!operator) { say("type your name under operator first", true); opInput.focus(); return; }
    window.localStorage.setItem("inspector.operator", operator);
    let r;
    try {
      r = await fetch("/api/feedback", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ id, label, operator }), credentials: "same-origin" });
    } catch (e) { say("feedback not sent: " + e, true); return; }
    const out = await r.json().catch(() => ({}));
    if (!r.ok) { say("feedback refused: " + (out.error || r.status), true); return; }
    say(operator + ": part " + id.slice(0, 8) + " " + out.action + "ed as " + label +
        (out.outcome ? " (" + out.outcome + ")" : "") + ", stored as frame " + out.frame_id.slice(0, 12));
  }

  function addParts(list, live) {
    const now = Date.now() / 1000;
    for (const d of list) {
      if (live) {
        probe.parts += 1;
        if (probe.latencies.length < 20000) probe.latencies.push(now - d.offered_at);
      }
      if (!state.parts.has(d.id)) state.order.push(d.id);
      state.parts.set(d.id, d);
    }
    while (state.order.length > 4 * MAX_ROWS) {
      const old = state.order.shift();
      if (old !== state.selected) state.parts.delete(old);
    }
    for (const d of list) {
      if (d.review && !state.review.find((r) => r.id === d.id)) state.review.unshift(d);
    }
    const last = list[list.length - 1];
    if (last && last.model_version && state.info) {  // a promotion or rollback reached us
      showModel(last.model_sha256 || "", last.model_version, last.model_channel);
    }
    state.review = state.review.slice(0, MAX_ROWS);
    scheduleRender();
  }

  // Parts arrive up to 25 batches a second; the tables and the frame are redrawn at most
  // RENDER_MS apart, so a fast line never keeps the browser busy.
  let renderTimer = null, lastRender = 0;
  function scheduleRender() {
    if (renderTimer !== null) return;
    const wait = Math.max(0, lastRender + RENDER_MS - Date.now());
    renderTimer = window.setTimeout(() => {
      renderTimer = null;
      lastRender = Date.now();
      renderRecent();
      renderReview();
      if (state.follow && state.order.length) select(state.order[state.order.length - 1]);
    }, wait);
  }

  function onFeedback(d) {
    state.parts.set(d.id, d);
    state.review = state.review.filter((r) => r.id !== d.id);
    if (d.review) state.review.unshift(d);
    renderRecent();
    renderReview();
    if (state.selected === d.id) renderSelected();
  }

  function renderStatus(s) {
    $("rate").textContent = s.rate.toFixed(1);
    pill("camera", s.camera.state, s.camera.state === "ok" ? "good" : "bad");
    pill("broker", s.broker.state, s.broker.state === "connected" ? "good" : (s.broker.state === "off" ? "" : "bad"));
    const ob = s.outbox;
    pill("outbox", ob.depth == null ? "-" : ob.depth + (ob.limit ? " / " + ob.limit : ""),
         ob.full ? "bad" : (ob.limit && ob.depth >= 0.8 * ob.limit ? "warn" : "good"));
    const a = $("alarms");
    a.hidden = !s.alarms.length;
    a.textContent = s.alarms.join(" \u00b7 ");
    const rows = [["parts", s.parts], ["ok", s.verdicts.ok], ["defect", s.verdicts.defect],
                  ["error results", s.error_results]];
    for (const c of (state.info ? state.info.classes : [])) rows.push(["class " + c, s.labels[c] || 0]);
    const f = s.feedback;
    rows.push(["operator confirmed", f.confirmed], ["operator corrected", f.corrected],
              ["confirmed false alarms", f.false_alarms], ["confirmed misses", f.misses]);
    if (s.console_skipped) rows.push(["parts the console skipped", s.console_skipped]);
    $("counters").replaceChildren(...rows.map(([k, v]) => {
      const tr = el("tr");
      tr.appendChild(el("td", {}, k));
      tr.appendChild(el("td", {}, String(v)));
      return tr;
    }));
  }

  // The model line: sha256 and backend, and for a registry model its version and channel.
  function showModel(sha, version, channel) {
    const m = state.info.model;
    $("model").textContent = sha.slice(0, 12) + " " + m.backend
      + (version ? " " + version + " (" + channel + ")" : "");
  }

  function onHello(h) {
    state.info = h.info;
    $("station").textContent = h.info.station;
    showModel(h.info.model.sha256, h.info.model.version, h.info.model.channel);
    $("model").title = h.info.model.path;
    document.title = h.info.station + ": inspector console";
    state.parts.clear(); state.order = []; state.review = h.review;
    if (!h.info.feedback) say("feedback is off: set console.store in the station config");
    renderStatus(h.status);
    addParts(h.parts, false);
  }

  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("open", () => pill("conn", "live", "good"));
    es.addEventListener("error", () => pill("conn", "reconnecting", "bad"));
    es.addEventListener("hello", (e) => onHello(JSON.parse(e.data)));
    es.addEventListener("parts", (e) => addParts(JSON.parse(e.data), true));
    es.addEventListener("status", (e) => renderStatus(JSON.parse(e.data)));
    es.addEventListener("feedback", (e) => onFeedback(JSON.parse(e.data)));
  }
  connect();
})();
