// Operations dashboard: redraws tiles, charts and tables from /dashboard/data.json every 2 s.
(function () {
  "use strict";
  const cfg = window.DASHBOARD;
  const csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  const PRIORITIES = ["critical", "high", "normal", "low"];
  const COLORS = ["#d33", "#e0a100", "#2f6fd6", "#7a7f8c", "#2e9e57", "#8e44ad", "#16a085", "#c0392b", "#555"];

  const PAST = { pause: "paused", resume: "resumed", cancel: "cancelled" };

  function lineChart(id) {
    return new Chart(document.getElementById(id), {
      type: "line",
      data: { labels: [], datasets: [] },
      // Counts per minute: whole numbers on the axis (precision 0), never 0.5 of a message.
      options: { animation: false, responsive: true, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
    });
  }
  const charts = { throughput: lineChart("throughput-chart"), events: lineChart("events-chart") };

  // `idle`: the one series drawn when there is none (a flat zero line, not an empty grid).
  function setSeries(chart, points, keys, idle) {
    chart.data.labels = points.map((p) => p.t.slice(11, 16));
    chart.data.datasets = (keys.length ? keys : [idle]).map((key, i) => ({
      label: key, data: points.map((p) => p[key] || 0), borderColor: COLORS[i % COLORS.length], tension: 0.2,
    }));
    chart.update();
  }

  function text(el, value) { if (el) { el.textContent = value; } }
  function age(seconds) { return seconds == null ? "-" : seconds < 120 ? `${seconds.toFixed(0)} s` : `${(seconds / 60).toFixed(1)} min`; }

  function renderTiles(queues) {
    for (const q of queues) {
      const tile = document.querySelector(`.tile[data-priority="${q.priority}"]`);
      if (!tile) { continue; }
      tile.className = `tile ${q.alert}`;
      text(tile.querySelector("[data-field=pending]"), q.pending);
      text(tile.querySelector("[data-field=processing]"), q.processing);
      text(tile.querySelector("[data-field=oldest]"), age(q.oldest_age_seconds));
      text(tile.querySelector("[data-field=sla]"), `${q.alert} (${q.sla_seconds} s)`);
      text(tile.querySelector("[data-field=workers]"), q.workers.length);
    }
  }

  function showAnswer(ok, message) {
    const answer = document.getElementById("campaign-answer");
    answer.className = ok ? "answer ok" : "answer refused";
    answer.textContent = message;
  }

  // What the server answered to a campaign button, in words: the new status, or why not (a 409
  // when the campaign had ended or someone else changed it first).
  async function answerOf(response, campaign, action) {
    if (response.redirected) { return [false, "Your session has ended: reload the page to log in again."]; }
    const body = await response.json().catch(() => ({}));
    if (response.ok) { return [true, `Campaign ${campaign.id} ${PAST[action]}: now ${body.status}.`]; }
    const why = (body.error && body.error.message) || `HTTP ${response.status}`;
    return [false, `Campaign ${campaign.id} not ${PAST[action]}: ${why}`];
  }

  function button(campaign, action) {
    const b = document.createElement("button");
    b.textContent = action;
    b.dataset.action = action;
    b.addEventListener("click", async () => {
      // Cancelling cannot be undone: its unsent messages are never sent. Ask first.
      if (action === "cancel" && !window.confirm(
        `Cancel campaign ${campaign.id} "${campaign.name}"? Its unsent messages will never be sent. This cannot be undone.`)) {
        return;
      }
      b.disabled = true;
      try {
        const response = await fetch(`${cfg.actionUrl}${campaign.id}/${action}`, {
          method: "POST", headers: { "X-CSRFToken": csrf }, credentials: "same-origin",
        });
        showAnswer(...await answerOf(response, campaign, action));
      } catch (err) {
        showAnswer(false, `Campaign ${campaign.id} not ${PAST[action]}: no answer from the server (${err}).`);
      }
      refresh();
    });
    return b;
  }

  function countsText(c) {
    const parts = [`${c.counts.sent} sent`];
    for (const name of ["failed", "suppressed", "cancelled"]) { if (c.counts[name]) { parts.push(`${c.counts[name]} ${name}`); } }
    return parts.join(", ");
  }

  function renderCampaigns(campaigns) {
    const body = document.querySelector("#campaigns tbody");
    body.replaceChildren();
    if (!campaigns.length) {
      body.insertAdjacentHTML("beforeend", '<tr><td colspan="6">no campaign running or ended in the last 24 h</td></tr>');
      return;
    }
    for (const c of campaigns) {
      const row = document.createElement("tr");
      row.dataset.campaign = c.id;
      row.className = c.ended_at ? "ended" : "";
      row.innerHTML = `<td>${c.id}</td><td></td><td class="status"></td>
        <td><progress></progress> <span class="count"></span></td><td class="counts"></td><td class="actions"></td>`;
      row.children[1].textContent = c.name;
      row.querySelector(".status").textContent = c.status;
      const bar = row.querySelector("progress");
      bar.max = c.total; bar.value = c.done;
      row.querySelector(".count").textContent = `${c.done}/${c.total}`;
      row.querySelector(".counts").textContent = countsText(c);
      const actions = row.querySelector(".actions");
      if (c.ended_at) {
        // Ended (completed, cancelled, failed): kept for 24 h with its final counts, no buttons.
        actions.textContent = `ended ${c.ended_at.slice(11, 16)} UTC`;
      } else {
        actions.append(button(c, c.status === "PAUSED" ? "resume" : "pause"), button(c, "cancel"));
      }
      body.append(row);
    }
  }

  function renderProviders(providers) {
    const body = document.querySelector("#providers tbody");
    body.replaceChildren();
    for (const p of providers) {
      const row = document.createElement("tr");
      row.className = p.alert;
      // A provider fault: it refuses every message the same way (delivery/services/provider_faults.py).
      const breaker = p.fault ? `${p.breaker} (fault: ${p.fault})` : p.breaker;
      for (const v of [p.provider, breaker, p.attempts, `${(p.error_rate * 100).toFixed(1)}%`, p.latency_p95_ms ?? "-"]) {
        const td = document.createElement("td"); td.textContent = v; row.append(td);
      }
      body.append(row);
    }
  }

  function renderList(id, items, format, empty) {
    const list = document.getElementById(id);
    list.replaceChildren();
    for (const item of items || []) { const li = document.createElement("li"); li.textContent = format(item); list.append(li); }
    if (!items || !items.length) { const li = document.createElement("li"); li.textContent = empty; list.append(li); }
  }

  function render(data) {
    const badge = document.getElementById("overall");
    badge.className = `badge ${data.alerts.overall}`; badge.textContent = data.alerts.overall;
    text(document.getElementById("updated"), `updated ${data.generated_at.slice(11, 19)} UTC`);
    renderTiles(data.queues);
    setSeries(charts.throughput, data.throughput.per_minute, PRIORITIES, "sent");
    const types = [...new Set(data.webhooks.per_minute.flatMap((p) => Object.keys(p).filter((k) => k !== "t")))].sort();
    setSeries(charts.events, data.webhooks.per_minute, types, "no events");
    renderCampaigns(data.campaigns);
    renderProviders(data.providers);
    renderList("failures", data.failures, (f) => `#${f.id} ${f.recipient}: ${f.error}`, "none");
    renderList("dead-letters", data.dead_letters, (d) => `#${d.id} ${d.summary}`,
      data.dead_letters === null ? "dead-letter store not installed" : "none");
    // Held sends by reason and provider, with what will settle them (decision 89).
    document.getElementById("ambiguous-total").textContent = `${data.ambiguous.total} held`;
    renderList("ambiguous", data.ambiguous.by_reason,
      (g) => `${g.count} ${g.reason} via ${g.provider || "unknown"}, oldest ${g.oldest_seconds} s: ${g.next_step}`,
      "none");
    renderList("ambiguous-ages", data.ambiguous.by_age.filter((a) => a.count), (a) => `${a.age}: ${a.count}`, "");
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  }

  async function refresh() {
    try {
      const response = await fetch(cfg.dataUrl, { credentials: "same-origin" });
      if (response.ok) { render(await response.json()); }
    } catch (err) { console.warn("dashboard refresh failed", err); }
  }

  render(JSON.parse(document.getElementById("initial-data").textContent));
  setInterval(refresh, 2000);
})();
