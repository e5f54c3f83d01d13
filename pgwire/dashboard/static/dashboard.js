// Swell dashboard: polls api/overview and renders it. Tables are built with textContent
// (names come from users); the dataflow and latency pictures are SVG strings the server
// rendered and escaped. No framework, no build step.
"use strict";
(function () {
  const POLL_MS = 2000;
  let polls = 0;
  const shown = new Map(); // job id -> the SVG string on screen (replace only on change)
  let lineageShown = null;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function human(n) {
    if (n === null || n === undefined) return "-";
    const a = Math.abs(n);
    if (a >= 1e9) return (n / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (a >= 1e3) return (n / 1e3).toFixed(1) + "k";
    return Number.isInteger(n) ? String(n) : n.toFixed(1);
  }

  function bytes(n) {
    if (n === null || n === undefined) return "-";
    if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + " GB";
    if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MB";
    if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KB";
    return n + " B";
  }

  function kv(parent, key, value) {
    const s = el("span", null, "kv");
    s.append(key + " ", el("b", value));
    parent.append(s);
  }

  function renderSummary(d) {
    const box = document.getElementById("summary");
    box.replaceChildren();
    kv(box, "epoch", d.epoch);
    kv(box, "barriers", d.barriers);
    kv(box, "last barrier", d.last_barrier_ms.toFixed(1) + " ms");
    kv(box, "barrier interval", d.barrier_interval_ms + " ms");
    if (d.freshness_mean_ms !== null) {
      kv(box, "freshness (mean)", d.freshness_mean_ms.toFixed(1) + " ms");
    }
    if (d.checkpoint_mean_ms !== null) {
      kv(box, "checkpoint (mean)", d.checkpoint_mean_ms.toFixed(1) + " ms");
    }
    kv(box, "relations", d.relations.length);
    kv(box, "streaming jobs", d.jobs.length);
    if (d.failure) box.append(el("p", "last epoch failed: " + d.failure, "error"));
  }

  function renderRelations(d) {
    const body = document.querySelector("#relations tbody");
    const rows = [];
    for (const r of d.relations) {
      const tr = el("tr");
      tr.dataset.relation = r.name;
      const name = el("td");
      const hasJob = d.jobs.some((j) => j.id === r.id);
      if (hasJob) {
        const a = el("a", r.schema === "public" ? r.name : r.schema + "." + r.name);
        a.href = "#job-" + r.id;
        name.append(a);
      } else {
        name.textContent = r.schema === "public" ? r.name : r.schema + "." + r.name;
      }
      name.title = r.definition;
      tr.append(name);
      tr.append(el("td", r.kind + (r.connector ? " (" + r.connector + ")" : "")));
      tr.append(el("td", human(r.rows), "num"));
      tr.append(el("td", human(r.rows_per_s), "num"));
      tr.append(el("td", human(r.lag), "num"));
      tr.append(el("td", bytes(r.state_bytes), "num"));
      tr.append(el("td", r.state || ""));
      tr.append(el("td", human(r.errors), "num"));
      tr.append(el("td", r.last_error || "", "err"));
      rows.push(tr);
    }
    body.replaceChildren(...rows);
  }

  function renderJobs(d) {
    const box = document.getElementById("jobs");
    const keep = new Set(d.jobs.map((j) => String(j.id)));
    for (const old of Array.from(box.children)) {
      if (!keep.has(old.dataset.job)) {
        shown.delete(old.dataset.job);
        old.remove();
      }
    }
    for (const job of d.jobs) {
      const id = String(job.id);
      let div = box.querySelector('div.job[data-job="' + id + '"]');
      if (!div) {
        div = el("div", null, "job");
        div.dataset.job = id;
        div.id = "job-" + id;
        const h = el("h3", job.name);
        h.append(" ", el("code", job.kind));
        div.append(h, el("div", null, "picture"));
        box.append(div);
      }
      if (shown.get(id) !== job.svg) {
        div.querySelector(".picture").innerHTML = job.svg;
        shown.set(id, job.svg);
      }
    }
    if (!d.jobs.length && !box.querySelector("p")) {
      box.append(el("p", "no materialized view or sink yet", "hint"));
    } else if (d.jobs.length) {
      for (const p of box.querySelectorAll(":scope > p")) p.remove();
    }
  }

  function render(d) {
    renderSummary(d);
    document.getElementById("latency").innerHTML = d.latency_svg;
    if (lineageShown !== d.lineage_svg) {
      const box = document.getElementById("lineage");
      box.innerHTML = d.lineage_svg || '<p class="hint">no relation yet</p>';
      lineageShown = d.lineage_svg;
    }
    renderRelations(d);
    renderJobs(d);
  }

  async function poll() {
    const status = document.getElementById("status");
    try {
      const resp = await fetch("api/overview", { cache: "no-store", credentials: "same-origin" });
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      render(await resp.json());
      polls += 1;
      document.body.dataset.polls = String(polls);
      status.textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) {
      status.textContent = "cannot reach the server: " + e.message;
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
