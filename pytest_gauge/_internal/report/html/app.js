"use strict";
// pytest-gauge HTML report. Every string from the data is put on the page with textContent (via el()),
// never parsed as HTML; the only markup is built here with createElement.
// A large suite's page carries its cases, transcripts and ledger lines gzipped (base64) in the "gauge-bulk"
// block: inflated (no request: the page opens from disk) and merged into the document before the first render.
(function (start) {
  const bulk = document.getElementById("gauge-bulk");
  if (!bulk) { start(null); return; }
  let bytes;
  if (Uint8Array.fromBase64) {
    bytes = Uint8Array.fromBase64(bulk.textContent);
  } else {
    const packed = atob(bulk.textContent);
    bytes = new Uint8Array(packed.length);
    for (let i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
  }
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(stream).text().then((text) => start(JSON.parse(text)));
})(function (bulk) {
  const D = JSON.parse(document.getElementById("gauge-data").textContent);
  if (bulk) Object.assign(D, bulk);
  const volatileBlock = document.getElementById("gauge-volatile");
  const V = volatileBlock ? JSON.parse(volatileBlock.textContent) : { latency: [] };
  const PAGE = 500;
  const MARKERS = [
    ["lrs", "LRS", "b-lrs", "the judge chose the side with the lower reward"],
    ["flip", "flip", "b-flip", "the preferred agent changed with the A/B order"],
    ["err", "error", "b-err", "the judge's verdict was an error"],
    ["sbf", "sat-but-failed", "b-sbf", "a user was satisfied but the task failed"],
    ["usr", "user", "b-usr", "the simulated user erred in a transcript of this case (user audit): its verdict rests on it"],
  ];
  const state = { sort: null, desc: false, markers: new Set(), pair: "", cat: "", cls: "", q: "", drivers: null, shown: PAGE };
  let visible = [];

  // replaceChildren writes a null child as the text "null": the children that are there, as el() takes them
  function fill(node, ...kids) {
    node.replaceChildren(...kids.filter((k) => k !== null && k !== undefined && k !== false));
  }
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") e.className = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (const k of kids) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : String(k));
    }
    return e;
  }
  const fmt = (v, d) => (v === null || v === undefined ? "–" : Number(v).toFixed(d === undefined ? 3 : d));
  const money = (v) => (v === null || v === undefined ? "unknown" : "$" + Number(v).toFixed(6));
  // a cost with calls that reported no usage is a lower bound, never a plain $0 (docs/protocol.md#costs)
  const atLeast = (v, n) => (n && v !== null && v !== undefined ? "at least " + money(v) + " (" + n + (n === 1 ? " call" : " calls") + " without usage)" : money(v));
  const noUsage = (lg) => lg.filter((i) => D.ledger[i][10]).length;
  const caseNoUsage = (c) => noUsage(c.lg) + (c.L >= 0 ? noUsage(D.transcripts[c.L].lg) : 0) + (c.R >= 0 ? noUsage(D.transcripts[c.R].lg) : 0);
  const yn = (v) => (v === null || v === undefined ? "unknown" : v ? "yes" : "no");
  const pct = (p) => (p >= 0.995 ? ">99%" : "~" + Math.max(1, Math.round(100 * p)) + "%");
  const repeats = (r) => (!r ? "–" : pct(r[0]) + (pct(r[0]) === pct(r[1]) ? "" : " (" + pct(r[1]) + " fresh tasks)"));
  const interval = (lo, hi, d) => (lo === null || hi === null || lo === undefined ? "–" : "[" + fmt(lo, d) + ", " + fmt(hi, d) + "]");
  const given = (x) => x !== null && x !== undefined;
  // the fewest decimals (at least d) at which a value prints as itself and its interval apart from it:
  // a cost of 0.0005 in [0.0003, 0.0007] is never "0.0005 [0.000, 0.000]"
  function places(v, lo, hi, d) {
    const p = (x, k) => Number(Number(x).toFixed(k));
    const ok = (k) => !(given(v) && v !== 0 && p(v, k) === 0) &&
      !(given(lo) && given(hi) && lo < hi && p(lo, k) === p(hi, k)) &&
      !(given(lo) && lo !== 0 && p(lo, k) === 0 && given(v) && v !== 0);
    let k = d;
    while (k < 12 && !ok(k)) k++;
    return k;
  }
  const GLOSSARY = new Map((D.glossary || []).map((g) => [g[0], g[1]]));
  const explain = (name) => GLOSSARY.get(String(name).split("(")[0]) || null;
  const table = (head, rows, id) =>
    el("div", { class: "scroll" }, el("table", { class: "grid", id: id },
      el("thead", null, el("tr", null, ...head.map((h) => el("th", { class: h[1] || null, scope: "col" }, h[0])))),
      el("tbody", null, ...rows)));
  const td = (v, cls) => el("td", { class: cls || null }, v);

  // ------------------------------------------------------------------ the headline, drawn
  // The verdict, then the method's numbers on one 0–1 axis with their 95% intervals: LRS on close
  // against distant pairs, flip rate and position bias per pair, satisfied-but-failed per agent; then the
  // bill by role (tokens, and cost where known). A number the run has not got is drawn as "–", never NaN.
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function verdictOf(gates) {
    if (!gates.length) return ["none", "no gates declared"];
    const n = (s) => gates.filter((g) => g.status === s).length;
    const parts = ["pass", "fail", "inconclusive", "skipped"].filter((s) => n(s)).map((s) => n(s) + " " + s);
    return [n("fail") ? "fail" : n("inconclusive") ? "inconclusive" : n("skipped") ? "skipped" : "pass", parts.join(", ")];
  }
  function headlineRows() {
    const byName = new Map(D.metrics.map((m) => [m[0], m]));
    const rows = [];
    const group = (title, names) => {
      const found = names.filter((n) => byName.has(n));
      if (found.length) rows.push([title, null], ...found.map((n) => [n, byName.get(n)]));
    };
    group("lower-reward-selected rate", ["lrs_close", "lrs_distant"]);
    const each = (prefix) => D.metrics.map((m) => m[0]).filter((n) => n.startsWith(prefix + "("));
    group("flip rate per pair", each("flip_rate"));
    group("position bias per pair", each("position_bias"));
    group("satisfied but failed, per agent", each("sat_but_failed_rate"));
    return rows;
  }
  function intervalChart(rows) {
    const rowH = 20, labelW = 250, axisW = 300, h = rowH * (rows.length + 1) + 6;
    const x = (v) => labelW + axisW * Math.max(0, Math.min(1, v));
    const g = svg("svg", { id: "headline-chart", role: "img", width: labelW + axisW + 90, height: h,
      viewBox: "0 0 " + (labelW + axisW + 90) + " " + h, "aria-label": "headline metrics with 95% intervals" });
    [0, 0.25, 0.5, 0.75, 1].forEach((t) => {
      g.append(svg("line", { x1: x(t), x2: x(t), y1: 0, y2: h - rowH, class: "grid-line" }));
      g.append(svg("text", { x: x(t), y: h - 6, "text-anchor": "middle", class: "tick" }, String(t)));
    });
    rows.forEach(([name, m], i) => {
      const y = rowH * i + 14;
      if (!m) { g.append(svg("text", { x: 0, y: y, class: "group" }, name)); return; }
      g.append(svg("text", { x: 12, y: y }, name));
      const [v, lo, hi, n] = [m[1], m[2], m[3], m[4]];
      if (given(lo) && given(hi)) g.append(svg("line", { x1: x(lo), x2: x(hi), y1: y - 4, y2: y - 4, class: "ci" }));
      if (given(v)) g.append(svg("circle", { cx: x(v), cy: y - 4, r: 4, class: "point" }));
      g.append(svg("text", { x: labelW + axisW + 8, y: y }, (given(v) ? fmt(v, 2) : "–") + " (n=" + n + ")"));
    });
    return g;
  }
  function headline(sec) {
    const [status, counts] = verdictOf(D.gates);
    sec.append(el("p", { id: "verdict-line", class: "verdict" }, "Verdict: ",
      el("span", { class: "status " + status }, status === "none" ? "no gates" : status.toUpperCase()),
      status === "none" ? "" : " (" + counts + ")"));
    const rows = headlineRows();
    if (rows.length) sec.append(el("div", { class: "headline" }, intervalChart(rows)));
    const tokens = D.costs.map((c) => (c[3] || 0) + (c[4] || 0));
    const all = tokens.reduce((a, b) => a + b, 0);
    if (D.costs.length) {
      sec.append(el("p", { id: "bill-line", class: "facts" }, "The bill by role: " + D.costs.map((c, i) =>
        c[0] + " " + (all ? Math.round((100 * tokens[i]) / all) : 0) + "% of tokens, " + atLeast(c[5], c[6])).join("; ")));
    }
  }

  // ------------------------------------------------------------------ overview
  function overview() {
    const sec = document.getElementById("overview");
    const nCases = D.cases.length;
    document.getElementById("title").textContent = "pytest-gauge: " + D.suite;
    sec.append(el("h2", { id: "overview-h" }, "Overview"),
      el("p", { class: "facts" }, nCases + " cases, " + D.tasks.length + " tasks, " + D.pairs.length +
        (D.pairs.length === 1 ? " pair" : " pairs") + "; backend " + D.backend + ", seed " + D.seed + "; total cost " + atLeast(D.total_cost, D.um)));
    headline(sec);
    sec.append(el("h3", null, "Gates"));
    if (!D.gates.length) sec.append(el("p", { class: "muted" }, "No gates declared."));
    else sec.append(table([["status"], ["gate"], ["value", "num"], ["95% interval", "num"], ["n", "num"], ["threshold", "num"], ["repeats on reruns", "num"], ["driving cases"]],
      D.gates.map((g, i) => el("tr", { "data-gate": i },
        td(el("span", { class: "status " + g.status }, g.status)), td(el("code", null, g.expr)),
        td(fmt(g.value, places(g.value, g.low, g.high, 3)), "num"), td(interval(g.low, g.high, places(g.value, g.low, g.high, 3)), "num"), td(g.n, "num"), td(fmt(g.threshold, places(g.threshold, null, null, 4)), "num"), td(repeats(g.repeats), "num"),
        td(g.drivers.length ? el("button", { type: "button", class: "drivers", onclick: () => showDrivers(i) },
          "show " + g.drivers.length + " case" + (g.drivers.length === 1 ? "" : "s")) : el("span", { class: "muted" }, "–")))), "gate-table"));
    const left = el("div", null), right = el("div", null);
    sec.append(el("div", { class: "ov" }, left, right));
    left.append(el("details", { id: "all-metrics" }, el("summary", null, "All metrics (" + D.metrics.length + ")"),
      table([["metric"], ["value", "num"], ["95% interval", "num"], ["n", "num"], ["method", "hide-narrow nowrap"]],
      D.metrics.map((m) => {
        const k = places(m[1], m[2], m[3], 3);
        return el("tr", null, td(el("code", { title: explain(m[0]) }, m[0])), td(fmt(m[1], Math.max(k, 4)), "num"), td(interval(m[2], m[3], k), "num"), td(m[4], "num"), td(m[5], "hide-narrow nowrap"));
      }), "metric-table")));
    if (D.elo_svg) {
      right.append(el("h3", null, "Elo"), el("div", { class: "elo" },
        el("img", { alt: "Elo ratings with 95% intervals", src: "data:image/svg+xml;charset=utf-8," + encodeURIComponent(D.elo_svg) })));
    }
    right.append(el("h3", null, "Cost by role"), table([["role"], ["calls", "num"], ["attempts", "num"], ["input tokens", "num"], ["output tokens", "num"], ["cost", "num"]],
      D.costs.map((c) => el("tr", null, td(c[0]), td(c[1], "num"), td(c[2], "num"), td(c[3], "num"), td(c[4], "num"), td(atLeast(c[5], c[6]), "num"))), "cost-table"));
    costPanel(sec);
    baselinePanel(sec);
    selfPreferencePanel(sec);
    humanPanel(sec);
    historyPanel(sec);
    glossary(sec);
  }

  // The verdict history (--gauge-history): reports/history.json, each gate's record over the last runs
  // (one mark per run, oldest first) and the tasks whose outcome differed between runs of the same setup
  function historyPanel(sec) {
    const h = D.history;
    if (!h) return;
    const mark = { pass: "✓", fail: "✗", inconclusive: "?", skipped: "–" };
    const trend = (statuses) => el("span", { class: "trend", role: "img", "aria-label": statuses.join(", ") },
      ...statuses.map((s, i) => el("span", { class: "run " + s, title: "run " + (i + 1) + " of " + statuses.length + ": " + s }, mark[s] || "·")));
    const pctOf = (x) => Math.round(100 * x) + "%";
    sec.append(el("h3", { id: "history-h" }, "History"),
      el("p", { class: "facts" }, h.runs + (h.runs === 1 ? " run" : " runs") + " of this suite in the history (this one included); flaky tasks " +
        h.flaky.length + " of " + h.tasks + ", stable over 2+ runs " + h.stable + ", seen once " + h.once + "."),
      h.gates.length ? table([["gate"], ["passed", "num"], ["last " + h.last + " runs, oldest first"]],
        h.gates.map((g) => el("tr", null, td(el("code", null, g[0])),
          td(g[1].filter((s) => s === "pass").length + "/" + g[1].length, "num"), td(trend(g[1])))), "history-gates") : null,
      h.flaky.length ? table([["flaky task"], ["runs", "num"], ["differing", "num"], ["flake rate", "num"], ["95% interval", "num"]],
        h.flaky.map((f) => el("tr", null, td(el("code", null, f[0])), td(f[1], "num"), td(f[2], "num"), td(pctOf(f[3]), "num"),
          td(pctOf(f[4]) + "–" + pctOf(f[5]), "num"))), "history-flaky") : el("p", { class: "muted", id: "history-flaky" }, "No flaky task."));
  }

  // Since the baseline (--gauge-baseline): metrics.json's "baseline" block, the tasks linked to both
  // transcripts as reports/baseline.md links them (the paths are relative to reports/, as this page is)
  function baselinePanel(sec) {
    const b = D.baseline;
    if (!b) return;
    const delta = (e) => {
      if (!e) return ["–", "–"];
      const k = places(e.value, e.low, e.high, 3);
      const v = given(e.value) ? (e.value > 0 ? "+" : "") + fmt(e.value, k) : "–";
      return [v, interval(e.low, e.high, k)];
    };
    const agents = Object.keys(b.agents);
    const flips = (title, id, key) => {
      const items = agents.flatMap((a) => b.agents[a][key].map((f) => el("li", { "data-agent": a, "data-task": f.task_id },
        el("code", null, a + ": " + (f.sample ? f.task_id + "#" + f.sample : f.task_id)),
        " reward " + fmt(f.reward_before) + " → " + fmt(f.reward_now) + " ",
        f.transcript_before ? el("a", { href: f.transcript_before }, "before") : null, " ",
        f.transcript_now ? el("a", { href: f.transcript_now }, "now") : null)));
      return el("div", null, el("strong", null, title + " (" + items.length + ")"),
        items.length ? el("ul", { id: id }, ...items) : el("p", { class: "muted", id: id }, "none"));
    };
    sec.append(el("h3", { id: "baseline-h" }, "Since the baseline"),
      el("p", { class: "facts" }, b.shared_tasks + " shared tasks" + (b.added_tasks.length ? ", " + b.added_tasks.length + " added" : "") +
        (b.removed_tasks.length ? ", " + b.removed_tasks.length + " removed" : "") +
        (b.added_agents.length ? "; new agents " + b.added_agents.join(", ") : "") + (b.removed_agents.length ? "; agents gone " + b.removed_agents.join(", ") : "")),
      el("p", { id: "baseline-changes", class: "facts" }, "What else changed: " + (agents.filter((a) => b.agents[a].changed.length)
        .map((a) => a + " (" + b.agents[a].changed.join("; ") + ")").concat(b.setup_changes || []).join("; ") || "nothing (agents' models and prompts, the judge's and user simulator's models, prompts and settings)")),
      table([["agent"], ["success before → now", "num"], ["Δ success", "num"], ["95% interval", "num"], ["Δ mean reward", "num"], ["95% interval", "num"], ["regressed / fixed", "num"]],
        agents.map((a) => {
          const x = b.agents[a];
          return el("tr", null, td(a), td(fmt(x.success_rate_before) + " → " + fmt(x.success_rate_now), "num"),
            ...delta(x["delta(success_rate)"]).map((v) => td(v, "num")), ...delta(x["delta(mean_reward)"]).map((v) => td(v, "num")),
            td(x.regressions.length + " / " + x.fixes.length, "num"));
        }), "baseline-table"),
      flips("Passed before, fails now", "baseline-regressed", "regressions"),
      flips("Failed before, passes now", "baseline-fixed", "fixes"),
      table([["judge and cost"], ["delta", "num"], ["95% interval", "num"]],
        [...Object.entries(b.judge), ["delta(cost_per_success)", b["delta(cost_per_success)"]]].map(([name, e]) =>
          el("tr", null, td(el("code", null, name)), ...delta(e).map((v) => td(v, "num")))), "baseline-judge"));
  }

  // A judge sharing a contestant's model: metrics.json's "self_preference" block
  function selfPreferencePanel(sec) {
    const p = D.self_preference;
    if (!p) return;
    const row = (label, e) => { const k = places(e.value, e.low, e.high, 3);
      return el("tr", null, td(label), td(fmt(e.value, k), "num"), td(interval(e.low, e.high, k), "num"), td(e.n, "num")); };
    sec.append(el("h3", { id: "self-preference-h" }, "Self-preference"),
      el("p", { class: "facts" }, "The judge model " + p.judge_model + " is also the model of " + p.agents.join(", ") +
        ": how often it picks the lower-reward transcript (by the rules), its own model's against the other agents'."),
      table([["picks the lower-reward transcript"], ["rate", "num"], ["95% interval", "num"], ["n", "num"]],
        [row("its own model's", p.own), row("another agent's", p.others), row("difference (own − others)", p.difference)], "self-preference-table"));
  }

  // The judge against people (--gauge-labels): metrics.json's "human" block
  function humanPanel(sec) {
    const h = D.human;
    if (!h) return;
    const who = (w) => (w === "main" ? "main verdict" : w === "panel" ? "panel majority" : w);
    const row = (label, a, k) => {
      const ka = places(a.value, a.low, a.high, 3);
      const kk = k ? places(k.value, k.low, k.high, 3) : 3;
      return el("tr", null, td(label), td(fmt(a.value, ka), "num"), td(interval(a.low, a.high, ka), "num"), td(a.n, "num"),
        td(k ? fmt(k.value, kk) : "", "num"), td(k ? interval(k.low, k.high, kk) : "", "num"));
    };
    const rows = Object.keys(h.agreement).map((w) => row(who(w), h.agreement[w], h.kappa[w]));
    rows.push(row("the rules' higher-reward slot", h.rules_agreement, null));
    if (h.labeller_agreement.n) rows.push(row("another labeller", h.labeller_agreement, h.labeller_kappa));
    sec.append(el("h3", { id: "human-h" }, "The judge against people"),
      el("p", { class: "facts" }, h.labels + " blind labels of " + h.cases + " cases by " + (h.labellers.join(", ") || "nobody") +
        (h.unknown_cases.length ? "; labels of " + h.unknown_cases.length + " cases not in this run were ignored" : "")),
      table([["compared with the labels"], ["agreement", "num"], ["95% interval", "num"], ["n", "num"], ["kappa", "num"], ["95% interval", "num"]], rows, "human-table"));
  }

  function glossary(sec) {
    if (!D.glossary || !D.glossary.length) return;
    sec.append(el("details", { id: "glossary" }, el("summary", null, "Metric glossary"),
      el("dl", null, ...D.glossary.flatMap((g) => [el("dt", null, el("code", null, g[0])), el("dd", null, g[1])]))));
  }

  // What to watch per role and model: tokens per task, retry rate, rate-limit waits (stable) and the
  // p50/p95 latency of successful attempts (the volatile block: it differs from run to run).
  function costPanel(sec) {
    if (!D.watch || !D.watch.length) return;
    const lat = new Map((V.latency || []).map((x) => [x[0] + "\u0000" + x[1], x]));
    sec.append(el("h3", null, "What to watch per role and model"),
      el("p", { class: "muted" }, "Tokens per task (nominal, every attempt), the share of attempts that were retries, 429 answers and the waits the gateway asked for; latency of successful live attempts (varies from run to run)."),
      table([["role"], ["model"], ["tokens per task", "num"], ["retry rate", "num"], ["429s", "num"], ["asked wait (s)", "num"], ["p50 latency (s)", "num"], ["p95 latency (s)", "num"]],
        D.watch.map((w) => {
          const l = lat.get(w[0] + "\u0000" + w[1]);
          return el("tr", null, td(w[0]), td(w[1]), td(fmt(w[2], 1), "num"), td(fmt(w[3], 3), "num"), td(w[4], "num"), td(fmt(w[5], 1), "num"),
            td(l ? fmt(l[3]) : "–", "num"), td(l ? fmt(l[4]) : "–", "num"));
        }), "watch-table"));
  }

  // ------------------------------------------------------------------ case table
  const pairName = (c) => D.pairs[c.p][0];
  const COLUMNS = [
    ["case", (c) => c.id],
    ["task", (c) => (c.t >= 0 ? D.tasks[c.t][0] : ""), false, true],
    ["category", (c) => c.cat, false, true],
    ["pair", pairName, false, true],
    ["order", (c) => c.o],
    ["choice", (c) => c.ch],
    ["reward left", (c) => c.rl, true],
    ["reward right", (c) => c.rr, true],
    ["markers", (c) => MARKERS.filter((m) => c[m[0]]).length, true],
    ["tokens incl. shared", (c) => c.tok, true],
    ["cost incl. shared", (c) => c.cost, true],
  ];

  function options(label, key, all, values) {
    const sel = el("select", { id: "f-" + key, "aria-label": label, onchange: (e) => { state[key] = e.target.value; refresh(); } },
      el("option", { value: "" }, all), ...values.map((v) => el("option", { value: v[0] }, v[1])));
    return el("label", null, label + " ", sel);
  }

  function cases() {
    const sec = document.getElementById("cases");
    const cats = [...new Set(D.cases.map((c) => c.cat))].sort();
    const filters = el("form", { class: "filters", onsubmit: (e) => e.preventDefault() },
      ...MARKERS.map((m) => el("label", { title: m[3] }, el("input", { type: "checkbox", id: "f-" + m[0], onchange: (e) => {
        if (e.target.checked) state.markers.add(m[0]); else state.markers.delete(m[0]); refresh(); } }), " " + m[1])),
      options("pair", "pair", "all pairs", D.pairs.map((p, i) => [String(i), p[0]])),
      options("category", "cat", "all categories", cats.map((c) => [c, c])),
      options("closeness", "cls", "close and distant", [["close", "close pairs"], ["distant", "distant pairs"]]),
      el("label", null, "search ", el("input", { type: "search", id: "f-q", placeholder: "case id", oninput: (e) => { state.q = e.target.value; refresh(); } })),
      el("span", { id: "driver-chip" }));
    const head = el("tr", null, ...COLUMNS.map((col, i) => el("th", { scope: "col", class: (col[2] ? "num" : "") + (col[3] ? " hide-narrow" : "") || null, "aria-sort": "none" },
      el("button", { type: "button", onclick: () => sortBy(i) }, col[0]))));
    const tbl = el("table", { class: "grid", id: "case-table" }, el("thead", null, head), el("tbody", { id: "case-rows", onkeydown: rowKeys }));
    sec.append(el("h2", { id: "cases-h" }, "Cases"), filters, el("p", { id: "case-count", role: "status" }),
      el("div", { class: "scroll" }, tbl), el("div", { class: "pager", id: "pager" }));
    refresh();
  }

  function matches(c) {
    for (const m of state.markers) if (!c[m]) return false;
    if (state.pair !== "" && String(c.p) !== state.pair) return false;
    if (state.cat !== "" && c.cat !== state.cat) return false;
    if (state.cls !== "" && D.pairs[c.p][3] !== state.cls) return false;
    if (state.q && !c.id.toLowerCase().includes(state.q.toLowerCase())) return false;
    return true;
  }

  function refresh(keepShown) {
    const pool = state.drivers === null ? D.cases.map((_, i) => i) : D.gates[state.drivers].drivers;
    visible = pool.filter((i) => matches(D.cases[i]));
    if (state.sort !== null) {
      const get = COLUMNS[state.sort][1];
      const sign = state.desc ? -1 : 1;
      visible.sort((a, b) => {
        const x = get(D.cases[a]), y = get(D.cases[b]);
        if (x === y) return a - b;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * sign;
      });
    }
    if (!keepShown) state.shown = PAGE;
    renderRows();
  }

  function renderRows() {
    const body = document.getElementById("case-rows");
    const frag = document.createDocumentFragment();
    const shown = visible.slice(0, state.shown);
    shown.forEach((i, k) => {
      const c = D.cases[i];
      frag.append(el("tr", { "data-case": i, tabindex: k === 0 ? "0" : "-1", onclick: () => openCase(i) },
        td(el("a", { href: "#case=" + i, tabindex: "-1" }, c.id)), td(COLUMNS[1][1](c), "hide-narrow"), td(c.cat, "hide-narrow"),
        td(pairName(c), "hide-narrow"), td(c.o), td(c.ch),
        td(fmt(c.rl, 2), "num"), td(fmt(c.rr, 2), "num"),
        td(el("span", null, ...MARKERS.filter((m) => c[m[0]]).map((m) => el("span", { class: "badge " + m[2], title: m[3] }, m[1])))),
        td(c.tok, "num"), td(atLeast(c.cost, caseNoUsage(c)), "num")));
    });
    body.replaceChildren(frag);
    document.getElementById("case-count").textContent = "Showing " + shown.length + " of " + visible.length +
      " matching cases (" + D.cases.length + " in all)";
    const pager = document.getElementById("pager");
    pager.replaceChildren();
    if (visible.length > shown.length) {
      pager.append(el("button", { type: "button", onclick: () => { state.shown += PAGE; renderRows(); } }, "show " + Math.min(PAGE, visible.length - shown.length) + " more"));
    }
    const chip = document.getElementById("driver-chip");
    chip.replaceChildren();
    if (state.drivers !== null) {
      chip.append(el("span", { class: "chip" }, "driving cases of ", el("code", null, D.gates[state.drivers].expr), " ",
        el("button", { type: "button", id: "clear-drivers", "aria-label": "show all cases", onclick: () => { state.drivers = null; refresh(); } }, "×")));
    }
    document.querySelectorAll("#case-table thead th").forEach((th, i) => {
      th.setAttribute("aria-sort", state.sort === i ? (state.desc ? "descending" : "ascending") : "none");
    });
  }

  function sortBy(i) {
    state.desc = state.sort === i ? !state.desc : false;
    state.sort = i;
    refresh(true);
  }

  function showDrivers(g) {
    state.drivers = g;
    refresh();
    location.hash = "#cases";
    const first = document.querySelector("#case-rows tr");
    if (first) first.focus();
  }

  function rowKeys(e) {
    const row = e.target.closest("tr");
    if (!row) return;
    let next = null;
    if (e.key === "ArrowDown" || e.key === "j") next = row.nextElementSibling;
    else if (e.key === "ArrowUp" || e.key === "k") next = row.previousElementSibling;
    else if (e.key === "Home") next = row.parentElement.firstElementChild;
    else if (e.key === "End") next = row.parentElement.lastElementChild;
    else if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openCase(Number(row.dataset.case)); return; }
    if (next) {
      e.preventDefault();
      row.tabIndex = -1;
      next.tabIndex = 0;
      next.focus();
    }
  }

  // ------------------------------------------------------------------ case view
  function openCase(i) {
    location.hash = "#case=" + i;
    route(); // at once, not on the (asynchronous) hashchange, which then finds it done
  }

  function turnView(t) {
    const box = el("div", { class: "turn t-" + t.r }, el("div", { class: "role" }, t.r === "tool" ? "tool result" + (t.rc !== null && t.rc !== undefined ? " · return code " + t.rc : "") : t.r + (t.final ? " (final reply)" : "")));
    if (t.c) box.append(el("pre", { class: "text" }, t.c));
    if (t.empty) box.append(el("div", { class: "fail" }, "empty turn: nothing said (blank text, no tool call)"));
    for (const call of t.calls || []) {
      box.append(el("div", { class: "call" }, el("span", { class: "role" }, "tool call · return code " + call.rc + " "),
        el("pre", { class: "text" }, call.n + "(" + call.a + ")"), call.e ? el("div", { class: "fail" }, call.e) : null));
    }
    return box;
  }

  function rulesView(title, rows) {
    if (!rows.length) return el("p", { class: "muted" }, title + ": none");
    return el("div", null, el("strong", null, title),
      el("ul", { class: "rules" }, ...rows.map((r) => el("li", { class: "rule " + (r[1] ? "pass" : "fail") },
        el("span", { class: "status" }, r[1] ? "pass " : "fail "), r[0], el("span", { class: "muted" }, " — " + r[2])))));
  }

  // ledger lines carry cache reads and writes (x[11], x[12]) only when some call used the prompt cache
  const cacheCols = D.ledger.some((x) => x.length > 11);
  const count = (v) => td(v === null || v === undefined ? "–" : v, "num");
  function ledgerTable(idx) {
    const cache = cacheCols ? [["cache read", "num"], ["cache write", "num"]] : [];
    return table([["call"], ["attempt", "num"], ["status"], ["role"], ["model"], ["in", "num"], ...cache, ["out", "num"], ["cost", "num"], ["finish"], ["error"]],
      idx.map((i) => { const x = D.ledger[i]; return el("tr", null, td(x[0]), td(x[1], "num"), td(x[2]), td(x[3]), td(x[4]), count(x[5]), ...(cacheCols ? [count(x[11]), count(x[12])] : []), count(x[6]), td(x[10] ? "unknown (no usage)" : money(x[7]), "num"), td(x[8] || ""), td(x[9] || "")); }));
  }

  function slotView(slot, ti, agent, side, reward, flags) {
    const t = ti >= 0 ? D.transcripts[ti] : null;
    const box = el("div", { class: "slot", id: "slot-" + slot },
      el("h3", null, "Slot " + slot + " ", el("span", { class: "who", hidden: true }, agent + " (" + side + ")")));
    if (!t) { box.append(el("p", { class: "fail" }, "transcript missing")); return box; }
    box.append(el("p", { class: "facts" }, "reward " + fmt(reward, 3) + " · task success " + yn(t.ok) + " · user satisfied " + yn(t.sat) +
      " · ended by " + t.end + " · " + t.tok[0] + " in / " + t.tok[1] + " out tokens · " + atLeast(t.cost, noUsage(t.lg))));
    if (t.err) box.append(el("p", { class: "fail" }, t.err));
    if (flags && flags.length) box.append(el("p", { class: "fail user-flags" }, "simulated user erred: " + flags.join(", ")));
    if (t.cut) { // the page embeds a bounded part of each transcript; its JSONL line has it all (blind until revealed)
      box.append(el("p", { class: "fail cut" }, t.cut + " characters of this transcript are not on the page; the whole transcript is ",
        el("span", { class: "who", hidden: true }, "line " + t.line + " of ", el("a", { href: t.src }, t.src.replace("../", ""))),
        el("span", { class: "muted" }, " (reveal the agents for its file)")));
    }
    box.append(el("div", { class: "transcript" }, ...t.turns.map(turnView)));
    box.append(rulesView("Success criteria", t.crit), rulesView("Hard constraints", t.cons));
    return box;
  }

  function caseView(i) {
    const c = D.cases[i];
    const sec = document.getElementById("case");
    const task = c.t >= 0 ? D.tasks[c.t] : ["?", "", ""];
    const pair = D.pairs[c.p];
    const aLeft = c.ao === "A=left";
    const uf = c.uf || [[], []];
    const slotA = aLeft ? [c.L, pair[1], "left", c.rl, uf[0]] : [c.R, pair[2], "right", c.rr, uf[1]];
    const slotB = aLeft ? [c.R, pair[2], "right", c.rr, uf[1]] : [c.L, pair[1], "left", c.rl, uf[0]];
    const pos = visible.indexOf(i);
    const nav = (d) => (pos >= 0 && visible[pos + d] !== undefined ? el("a", { href: "#case=" + visible[pos + d] }, d < 0 ? "← previous" : "next →") : null);
    const reveal = el("button", { type: "button", id: "reveal", "aria-pressed": "false", onclick: () => {
      const on = reveal.getAttribute("aria-pressed") !== "true";
      reveal.setAttribute("aria-pressed", String(on));
      reveal.textContent = on ? "hide agent names" : "reveal agent names";
      sec.querySelectorAll(".who").forEach((w) => { w.hidden = !on; });
    } }, "reveal agent names");
    const j = c.j;
    fill(sec,
      el("p", null, el("a", { href: "#cases", id: "back" }, "← all cases"), " ", nav(-1), " ", nav(1)),
      el("h2", { id: "case-h", tabindex: "-1" }, c.id),
      el("p", { class: "facts" }, "task " + task[0] + " · " + task[1] + " · pair " + pair[0] + " (" + (pair[3] || "?") + ") · order " + c.o + " · sample " + c.s),
      el("h3", null, "Task"), el("pre", { class: "text" }, task[2]),
      el("h3", null, "Transcripts as the judge saw them "), reveal,
      el("div", { class: "cols" }, slotView("A", ...slotA), slotView("B", ...slotB)),
      el("h3", null, "Judge"),
      el("p", { id: "verdict" }, "choice ", el("strong", null, c.ch), " · judge reward A " + fmt(j[0], 2) + ", B " + fmt(j[1], 2) + " · rule rewards A " + fmt(slotA[3], 2) + ", B " + fmt(slotB[3], 2)),
      el("p", null, "reason: ", el("span", { class: "text" }, j[2] || "–")),
      j[4] ? el("p", { class: "fail" }, "error: " + j[4]) : null,
      j[3] ? el("div", null, "raw verdict:", el("pre", { class: "text" }, j[3])) : null,
      c.js.length ? el("div", null, el("strong", null, "Every verdict (repeats and judges)"), table([["judge"], ["repeat", "num"], ["choice"], ["reward A", "num"], ["reward B", "num"], ["reason"], ["raw / error"]],
        c.js.map((v) => el("tr", null, td(v[0]), td(v[1], "num"), td(v[2]), td(fmt(v[3], 2), "num"), td(fmt(v[4], 2), "num"), td(v[5]), td((v[6] || "") + (v[7] ? " " + v[7] : "")))))) : null,
      el("h3", null, "Ledger"),
      el("p", { class: "muted" }, "judge calls of this case"), ledgerTable(c.lg),
      el("p", { class: "muted" }, "slot A transcript calls"), ledgerTable(slotA[0] >= 0 ? D.transcripts[slotA[0]].lg : []),
      el("p", { class: "muted" }, "slot B transcript calls"), ledgerTable(slotB[0] >= 0 ? D.transcripts[slotB[0]].lg : []));
  }

  // ------------------------------------------------------------------ labelling mode (blind)
  // A case as the judge saw it: the task, slots A and B (names redacted), no reward, rule result or verdict.
  // The answers stay in this browser (local storage, one entry per report) until exported as labels.jsonl.
  const LKEY = ["gauge-labels", location.pathname, D.suite, D.seed, D.cases.length, D.cases.length ? D.cases[0].id : ""].join("\u0000");
  const sampled = new Map((D.sample || []).map((s) => [s[0], s]));
  const queue = [...(D.sample || []).map((s) => s[0]), ...D.cases.map((_, i) => i).filter((i) => !sampled.has(i))];
  let labelAt = -1;
  function loadLabels() {
    try {
      const x = JSON.parse(window.localStorage.getItem(LKEY) || "null");
      if (x && typeof x === "object" && x.labels && typeof x.labels === "object") return { name: String(x.name || ""), labels: x.labels };
    } catch (e) { /* storage off or unreadable: start empty */ }
    return { name: "", labels: {} };
  }
  function saveLabels(st) {
    try { window.localStorage.setItem(LKEY, JSON.stringify(st)); } catch (e) { /* storage off: kept for this page only */ }
  }
  function exportText(st) {
    const byId = new Map(D.cases.map((c, i) => [c.id, i]));
    return Object.keys(st.labels).filter((id) => byId.has(id)).sort((a, b) => byId.get(a) - byId.get(b)).map((id) => {
      const s = sampled.get(byId.get(id));
      const x = st.labels[id];
      return JSON.stringify({ format_version: 1, suite: D.suite, case_id: id, label: x.label, labeller: st.name.trim() || "anonymous",
        note: x.note || "", weight: s ? s[1] : 1, stratum: s ? s[2] : "", transcripts: D.cases[byId.get(id)].h }) + "\n";
    }).join("");
  }
  function refreshExport() {
    const text = exportText(loadLabels());
    const box = document.getElementById("label-export");
    if (box) box.value = text;
    const dl = document.getElementById("label-download");
    if (dl) dl.setAttribute("href", "data:application/x-ndjson;charset=utf-8," + encodeURIComponent(text));
  }
  function nextToLabel(from) {
    const st = loadLabels();
    for (let k = 1; k <= queue.length; k++) {
      const i = queue[(from + k) % queue.length];
      if (!st.labels[D.cases[i].id]) return i;
    }
    return queue[Math.min(from + 1, queue.length - 1)];
  }
  function labelSlot(slot, ti) {
    const t = ti >= 0 ? D.transcripts[ti] : null;
    const box = el("div", { class: "slot", id: "lslot-" + slot }, el("h3", null, "Slot " + slot));
    if (!t) { box.append(el("p", { class: "fail" }, "transcript missing")); return box; }
    if (t.cut) box.append(el("p", { class: "muted" }, t.cut + " characters of this transcript are not on the page"));
    box.append(el("div", { class: "transcript" }, ...t.turns.map(turnView)));
    return box;
  }
  function pickLabel(choice) {
    const c = D.cases[labelAt];
    const st = loadLabels();
    st.labels[c.id] = { label: choice, note: document.getElementById("label-note").value };
    saveLabels(st);
    location.hash = "#label=" + nextToLabel(queue.indexOf(labelAt));
    route();
  }
  function labelView(i) {
    labelAt = i;
    const st = loadLabels();
    const c = D.cases[i];
    const task = c.t >= 0 ? D.tasks[c.t] : ["?", "", ""];
    const aLeft = c.ao === "A=left";
    const A = aLeft ? c.L : c.R, B = aLeft ? c.R : c.L;
    const rules = A >= 0 ? D.transcripts[A] : B >= 0 ? D.transcripts[B] : null;
    const mine = st.labels[c.id];
    const pos = queue.indexOf(i);
    const done = Object.keys(st.labels).length;
    const note = el("textarea", { id: "label-note", rows: "2", "aria-label": "note (optional)", placeholder: "note (optional)" });
    note.value = mine ? mine.note || "" : "";
    const button = (key, choice, text) => el("button", { type: "button", id: "label-" + choice, "aria-pressed": String(!!mine && mine.label === choice), onclick: () => pickLabel(choice) }, key + " · " + text);
    const go = (d) => { location.hash = "#label=" + queue[(pos + d + queue.length) % queue.length]; route(); };
    fill(document.getElementById("label"),
      el("h2", { id: "label-h", tabindex: "-1" }, "Label: which response is better?"),
      el("p", { class: "facts", id: "label-progress" }, done + " of " + D.cases.length + " cases labelled · case " + (pos + 1) + " of the queue" +
        (sampled.size ? " (the " + sampled.size + " cases of the labelling sample first)" : "")),
      el("p", null, el("label", null, "your name ", el("input", { id: "labeller", type: "text", value: st.name, "aria-label": "labeller's name",
        oninput: (e) => { const s = loadLabels(); s.name = e.target.value; saveLabels(s); refreshExport(); } }))),
      el("h3", null, "Task"), el("pre", { class: "text" }, task[2]),
      rules && rules.crit.length ? el("div", null, el("strong", null, "Success criteria"), el("ul", null, ...rules.crit.map((r) => el("li", null, r[0])))) : null,
      rules && rules.cons.length ? el("div", null, el("strong", null, "Hard constraints"), el("ul", null, ...rules.cons.map((r) => el("li", null, r[0])))) : null,
      el("div", { class: "cols" }, labelSlot("A", A), labelSlot("B", B)),
      el("p", { class: "label-keys" }, button("1", "A", "A is better"), " ", button("2", "B", "B is better"), " ", button("3", "tie", "tie"), " ",
        el("button", { type: "button", onclick: () => go(-1) }, "← previous"), " ", el("button", { type: "button", onclick: () => go(1) }, "next →")),
      el("p", null, note),
      el("h3", null, "Export"),
      el("p", { class: "muted" }, "labels.jsonl, one line per labelled case; give it to a run with --gauge-labels FILE."),
      el("p", null, el("a", { id: "label-download", download: "labels.jsonl", href: "data:," }, "download labels.jsonl"), " ",
        el("button", { type: "button", id: "label-copy", onclick: copyLabels }, "copy")),
      el("textarea", { id: "label-export", rows: "6", readonly: true, "aria-label": "labels.jsonl" }));
    refreshExport();
  }
  function copyLabels() {
    const box = document.getElementById("label-export");
    const fallback = () => { box.select(); try { document.execCommand("copy"); } catch (e) { /* selected: copy by hand */ } };
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(box.value).catch(fallback);
    else fallback();
  }

  let routed = null;
  let lastCase = -1;
  function route() {
    if (location.hash === routed) return;
    routed = location.hash;
    const m = /^#case=(\d+)$/.exec(location.hash);
    const sec = document.getElementById("case");
    const inCase = m !== null && Number(m[1]) < D.cases.length;
    const lm = /^#label(?:=(\d+))?$/.exec(location.hash);
    const inLabel = lm !== null && D.cases.length > 0;
    document.getElementById("overview").hidden = inCase || inLabel;
    document.getElementById("cases").hidden = inCase || inLabel;
    document.getElementById("label").hidden = !inLabel;
    sec.hidden = !inCase;
    if (inLabel) {
      const want = lm[1] !== undefined && Number(lm[1]) < D.cases.length ? Number(lm[1]) : nextToLabel(-1);
      labelView(want);
      window.scrollTo(0, 0);
      document.getElementById("label-h").focus();
    } else if (inCase) {
      lastCase = Number(m[1]);
      caseView(lastCase);
      window.scrollTo(0, 0);
      document.getElementById("case-h").focus();
    } else if (location.hash === "#cases") {
      // back from a case: focus its row (the roving tab stop moves there), else the list's tab stop
      const last = document.querySelector('#case-rows tr[data-case="' + lastCase + '"]');
      const row = last || document.querySelector('#case-rows tr[tabindex="0"]');
      if (last) {
        document.querySelectorAll('#case-rows tr[tabindex="0"]').forEach((r) => { r.tabIndex = -1; });
        last.tabIndex = 0;
      }
      if (row) row.focus();
    }
  }

  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !document.getElementById("case").hidden) location.hash = "#cases";
    const typing = e.target && (e.target.tagName === "INPUT" || e.target.tagName === "TEXTAREA" || e.target.tagName === "SELECT");
    if (document.getElementById("label").hidden || typing || e.ctrlKey || e.metaKey || e.altKey) return;
    const choice = { 1: "A", 2: "B", 3: "tie" }[e.key];
    if (choice) { e.preventDefault(); pickLabel(choice); }
  });
  window.addEventListener("hashchange", route);
  overview();
  cases();
  route();
  document.documentElement.dataset.ready = "1";
  performance.mark("gauge-ready"); // first render done (benchmarks/bench_html_report.py reads it)
});
