/* Jobs list: GET /api/v1/jobs/ with the filters of the form, polled so status badges change without
 * a reload. Filters live in the page's query string, so a filtered list can be bookmarked. */
(function () {
  "use strict";
  const P = window.Portal;
  const el = P.el;
  const form = document.getElementById("job-filters");
  const status = document.getElementById("filter-status");
  const team = document.getElementById("filter-team");
  const mine = document.getElementById("filter-mine");
  const PAGE_SIZE = 25;
  let page = 1;
  let poller = null;

  // Restore the filters from the address bar.
  const params = new URLSearchParams(location.search);
  if (params.get("status") !== null) {
    const wanted = params.get("status");
    if (!Array.from(status.options).some(function (o) { return o.value === wanted; })) status.appendChild(el("option", { value: wanted, text: wanted }));
    status.value = wanted;
  }
  if (params.get("team")) team.value = params.get("team");
  if (params.get("user")) mine.checked = true;
  page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);

  function query() {
    const q = new URLSearchParams();
    if (status.value) q.set("status", status.value);
    if (team.value) q.set("team", team.value);
    if (mine.checked) q.set("user", mine.value);
    return q;
  }

  function row(job) {
    const where = job.status === "QUEUED"
      ? (job.queue_position ? "#" + job.queue_position + " — " : "") + (job.pending_reason || "waiting")
      : job.failure_category ? job.failure_category + ": " + (job.failure_message || "") : job.pending_reason || "";
    return el("tr", { "data-job-id": job.id, "data-status": job.status }, [
      el("td", {}, [el("a", { href: "/jobs/" + job.id + "/", text: "#" + job.id + " " + (job.name || "(unnamed)") })]),
      el("td", {}, [P.badge(job.status)]),
      el("td", { text: job.team_slug }),
      el("td", { text: job.user }),
      el("td", {}, [el("code", { text: job.image_reference })]),
      el("td", { text: P.asks(job) + (job.replicas > 1 ? " ×" + job.replicas : "") }),
      el("td", { class: "reason", text: where }),
      el("td", {}, [P.timeEl(job.submitted_at || job.created_at)]),
    ]);
  }

  async function refresh() {
    const q = query();
    q.set("page", String(page));
    q.set("page_size", String(PAGE_SIZE));
    const answer = await P.api("/api/v1/jobs/?" + q.toString());
    const summary = document.getElementById("jobs-summary");
    if (!answer.ok) {
      if (answer.status === 404 && page > 1) { page = 1; return true; }  // the list shrank under us
      summary.textContent = (answer.data && answer.data.message) || "The jobs cannot be loaded.";
      return true;
    }
    const data = answer.data;
    const body = document.querySelector("#jobs-table tbody");
    const rows = data.results.map(row);
    if (!rows.length) rows.push(el("tr", {}, [el("td", { colspan: "8", text: "No jobs match these filters." })]));
    body.replaceChildren.apply(body, rows);
    const first = data.count ? (page - 1) * PAGE_SIZE + 1 : 0;
    const last = (page - 1) * PAGE_SIZE + data.results.length;
    const text = data.count ? "Jobs " + first + "–" + last + " of " + data.count : "No jobs";
    // Only touch the live region when the words change, so screen readers are not spammed.
    if (summary.textContent !== text) summary.textContent = text;
    document.getElementById("page-label").textContent = "Page " + page + " of " + Math.max(1, Math.ceil(data.count / PAGE_SIZE));
    document.getElementById("page-prev").disabled = !data.previous;
    document.getElementById("page-next").disabled = !data.next;
    return true;
  }

  function changed() {
    const q = query();
    if (page > 1) q.set("page", String(page));
    history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q.toString() : ""));
    poller.now();
  }

  form.addEventListener("change", function () { page = 1; changed(); });
  form.addEventListener("submit", function (e) { e.preventDefault(); });
  document.getElementById("page-prev").addEventListener("click", function () { page = Math.max(1, page - 1); changed(); });
  document.getElementById("page-next").addEventListener("click", function () { page += 1; changed(); });
  poller = P.poll(refresh, 3000);
})();
