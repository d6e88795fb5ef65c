/* Jobs list: GET /api/v1/jobs/ with the filters of the form (name search, status, team, mine) and the
 * chosen order, polled so status badges change without a reload; runtime and GPU-hours of the shown
 * jobs from /portal/jobs/usage (the run ledger). Filters and order live in the query string, so a
 * list can be bookmarked. Bulk cancel: the jobs you may cancel get a checkbox, and the selection is
 * cancelled through POST /portal/jobs/cancel after an inline confirmation. */
(function () {
  "use strict";
  const P = window.Portal;
  const el = P.el;
  const $ = function (id) { return document.getElementById(id); };
  const form = $("job-filters");
  const nameBox = $("filter-name");
  const status = $("filter-status");
  const team = $("filter-team");
  const mine = $("filter-mine");
  const table = $("jobs-table");
  const PAGE_SIZE = 25;
  const FINAL = ["SUCCEEDED", "FAILED", "STOPPED"];
  const COLUMNS = 11;
  // Orders the API can apply to the whole list; the others (runtime, GPU-hours) sort the shown page.
  const SERVER_SORTS = ["id", "status", "submitted_at"];
  const superuser = table.dataset.superuser === "true";
  const username = table.dataset.username;
  const roles = {};
  Array.from(team.options).forEach(function (o) { if (o.value) roles[o.value] = o.dataset.role; });
  let page = 1;
  let sort = { key: "", desc: true };
  let jobs = [];
  let usage = {};
  const selected = new Set();
  let poller = null;

  // Restore the filters and the order from the address bar.
  const params = new URLSearchParams(location.search);
  if (params.get("status") !== null) {
    const wanted = params.get("status");
    if (!Array.from(status.options).some(function (o) { return o.value === wanted; })) status.appendChild(el("option", { value: wanted, text: wanted }));
    status.value = wanted;
  }
  if (params.get("team")) team.value = params.get("team");
  if (params.get("user")) mine.checked = true;
  if (params.get("name")) nameBox.value = params.get("name");
  if (params.get("sort")) {
    const s = params.get("sort");
    sort = { key: s.replace(/^-/, ""), desc: s.charAt(0) === "-" };
  }
  page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);

  function mayCancel(job) {
    if (FINAL.indexOf(job.status) >= 0 || job.status === "STOPPING") return false;
    const role = roles[String(job.team)];
    return superuser || role === "owner" || (role === "member" && job.user === username);
  }

  function query() {
    const q = new URLSearchParams();
    if (nameBox.value.trim()) q.set("name", nameBox.value.trim());
    if (status.value) q.set("status", status.value);
    if (team.value) q.set("team", team.value);
    if (mine.checked) q.set("user", mine.value);
    return q;
  }

  function duration(seconds) {
    if (seconds === undefined || seconds === null) return "–";
    const s = Math.round(seconds);
    if (s < 60) return s + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min " + (s % 60) + " s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + " h " + (m % 60) + " min";
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  function row(job) {
    const where = job.status === "QUEUED"
      ? (job.queue_position ? "#" + job.queue_position + " — " : "") + (job.pending_reason || "waiting")
      : job.failure_category ? job.failure_category + ": " + (job.failure_message || "") : job.pending_reason || "";
    const use = usage[job.id] || {};
    const pick = mayCancel(job)
      ? el("input", { type: "checkbox", class: "pick", value: job.id, "aria-label": "Select job #" + job.id + " " + (job.name || ""), checked: selected.has(job.id) })
      : null;
    return el("tr", { "data-job-id": job.id, "data-status": job.status }, [
      el("td", {}, [pick]),
      el("td", {}, [el("a", { href: "/jobs/" + job.id + "/", text: "#" + job.id + " " + (job.name || "(unnamed)") })]),
      el("td", {}, [P.badge(job.status)]),
      el("td", { text: job.team_slug }),
      el("td", { text: job.user }),
      el("td", {}, [el("code", { text: job.image_reference })]),
      el("td", { text: P.asks(job) + (job.replicas > 1 ? " ×" + job.replicas : "") }),
      el("td", { class: "runtime", "data-seconds": use.runtime_seconds === undefined ? "" : use.runtime_seconds, text: duration(use.runtime_seconds) }),
      el("td", { class: "gpu-hours", "data-hours": use.gpu_hours === undefined ? "" : use.gpu_hours, text: use.gpu_hours === undefined ? "–" : use.gpu_hours.toFixed(2) }),
      el("td", { class: "reason", text: where }),
      el("td", {}, [P.timeEl(job.submitted_at || job.created_at)]),
    ]);
  }

  function ordered(list) {
    if (sort.key !== "runtime" && sort.key !== "gpu_hours") return list;
    const field = sort.key === "runtime" ? "runtime_seconds" : "gpu_hours";
    const value = function (job) { const u = usage[job.id]; return u ? u[field] : -1; };
    return list.slice().sort(function (a, b) { return (sort.desc ? -1 : 1) * (value(a) - value(b)) || b.id - a.id; });
  }

  function render() {
    const body = table.querySelector("tbody");
    const rows = ordered(jobs).map(row);
    if (!rows.length) rows.push(el("tr", {}, [el("td", { colspan: String(COLUMNS), text: "No jobs match these filters." })]));
    body.replaceChildren.apply(body, rows);
    table.querySelectorAll("th[data-sort]").forEach(function (th) {
      th.setAttribute("aria-sort", th.dataset.sort === sort.key ? (sort.desc ? "descending" : "ascending") : "none");
    });
    const pickable = jobs.filter(mayCancel);
    const all = $("select-all");
    all.disabled = !pickable.length;
    all.checked = pickable.length > 0 && pickable.every(function (j) { return selected.has(j.id); });
    updateBulk();
  }

  function updateBulk() {
    const button = $("bulk-cancel");
    button.disabled = selected.size === 0;
    button.textContent = selected.size ? "Cancel selected (" + selected.size + ")" : "Cancel selected";
  }

  async function refresh() {
    const q = query();
    q.set("page", String(page));
    q.set("page_size", String(PAGE_SIZE));
    if (SERVER_SORTS.indexOf(sort.key) >= 0) q.set("ordering", (sort.desc ? "-" : "") + sort.key + (sort.key === "id" ? "" : ",-id"));
    const answer = await P.api("/api/v1/jobs/?" + q.toString());
    const summary = $("jobs-summary");
    if (!answer.ok) {
      if (answer.status === 404 && page > 1) { page = 1; return true; }  // the list shrank under us
      summary.textContent = (answer.data && answer.data.message) || "The jobs cannot be loaded.";
      return true;
    }
    const data = answer.data;
    jobs = data.results;
    // A selected job that left the page or can no longer be cancelled is dropped from the selection.
    const still = new Set(jobs.filter(mayCancel).map(function (j) { return j.id; }));
    Array.from(selected).forEach(function (id) { if (!still.has(id)) selected.delete(id); });
    if (jobs.length) {
      const used = await P.api("/portal/jobs/usage?ids=" + jobs.map(function (j) { return j.id; }).join(","));
      usage = used.ok ? used.data.jobs : {};
    }
    render();
    const first = data.count ? (page - 1) * PAGE_SIZE + 1 : 0;
    const last = (page - 1) * PAGE_SIZE + data.results.length;
    const text = data.count ? "Jobs " + first + "–" + last + " of " + data.count : "No jobs";
    // Only touch the live region when the words change, so screen readers are not spammed.
    if (summary.textContent !== text) summary.textContent = text;
    $("page-label").textContent = "Page " + page + " of " + Math.max(1, Math.ceil(data.count / PAGE_SIZE));
    $("page-prev").disabled = !data.previous;
    $("page-next").disabled = !data.next;
    return true;
  }

  function changed() {
    const q = query();
    if (sort.key) q.set("sort", (sort.desc ? "-" : "") + sort.key);
    if (page > 1) q.set("page", String(page));
    history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q.toString() : ""));
    poller.now();
  }

  let typing = null;
  nameBox.addEventListener("input", function () {
    clearTimeout(typing);
    typing = setTimeout(function () { page = 1; changed(); }, 250);
  });
  form.addEventListener("change", function (e) { if (e.target !== nameBox) { page = 1; changed(); } });
  form.addEventListener("submit", function (e) { e.preventDefault(); page = 1; changed(); });
  $("page-prev").addEventListener("click", function () { page = Math.max(1, page - 1); changed(); });
  $("page-next").addEventListener("click", function () { page += 1; changed(); });

  table.querySelectorAll("th[data-sort] button.sort").forEach(function (button) {
    button.addEventListener("click", function () {
      const key = button.parentElement.dataset.sort;
      sort = sort.key === key ? { key: key, desc: !sort.desc } : { key: key, desc: key !== "id" ? true : false };
      if (SERVER_SORTS.indexOf(key) >= 0) { page = 1; changed(); return; }
      const q = new URLSearchParams(location.search);
      q.set("sort", (sort.desc ? "-" : "") + key);
      history.replaceState(null, "", location.pathname + "?" + q.toString());
      render();
    });
  });

  table.addEventListener("change", function (e) {
    const box = e.target;
    if (box.id === "select-all") {
      jobs.filter(mayCancel).forEach(function (j) { if (box.checked) selected.add(j.id); else selected.delete(j.id); });
      render();
      return;
    }
    if (!box.classList.contains("pick")) return;
    const id = Number(box.value);
    if (box.checked) selected.add(id); else selected.delete(id);
    render();
  });

  const confirmBox = $("bulk-confirm");
  $("bulk-cancel").addEventListener("click", function () {
    if (!selected.size) return;
    const ids = Array.from(selected).sort(function (a, b) { return a - b; });
    $("bulk-confirm-text").textContent = "Cancel " + ids.length + (ids.length === 1 ? " job" : " jobs") + " (" +
      ids.map(function (id) { return "#" + id; }).join(", ") + ")? Running tasks are stopped; queued jobs leave the queue.";
    confirmBox.hidden = false;
    $("bulk-yes").focus();
  });
  $("bulk-no").addEventListener("click", function () { confirmBox.hidden = true; $("bulk-cancel").focus(); });
  $("bulk-yes").addEventListener("click", async function () {
    const yes = $("bulk-yes");
    yes.disabled = true;
    const ids = Array.from(selected);
    const answer = await P.api("/portal/jobs/cancel", { method: "POST", body: { ids: ids } });
    yes.disabled = false;
    confirmBox.hidden = true;
    const note = $("bulk-note");
    if (!answer.ok) {
      note.textContent = (answer.data && answer.data.message) || "The jobs could not be cancelled.";
    } else {
      selected.clear();
      const done = answer.data.cancelled.length;
      const refused = answer.data.refused;
      note.textContent = "Cancelled " + done + (done === 1 ? " job" : " jobs") + "." +
        (refused.length ? " Not cancelled: " + refused.map(function (r) { return "#" + r.id + " (" + r.message + ")"; }).join("; ") : "");
    }
    poller.now();
  });

  poller = P.poll(refresh, 3000);
})();
