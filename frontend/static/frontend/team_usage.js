/* Team Usage page: GPU-hours of the month by user (bars) and per day (a line), drawn with the
 * portal's charts from the numbers the page embeds (frontend.team_usage, from the usage ledger). */
(function () {
  "use strict";
  const source = document.getElementById("usage-data");
  if (!source || !window.Charts) return;
  const data = JSON.parse(source.textContent);
  const users = document.getElementById("user-chart");
  if (users && data.users.length) {
    window.Charts.bars(users, {
      labels: data.users, yLabel: "GPU-hours", height: 260,
      series: [{ label: "GPU-hours", values: data.user_hours, color: "#1f5fbf" }],
    });
  }
  const days = document.getElementById("day-chart");
  if (days) {
    // ISO dates are UTC days: show "12" for the 12th, read from the text so no time zone shifts it.
    window.Charts.bars(days, {
      labels: data.days.map(function (d) { return String(Number(d.slice(8, 10))); }), yLabel: "GPU-hours", height: 260,
      series: [{ label: "GPU-hours per day", values: data.day_hours, color: "#c2410c", line: true }],
    });
  }
})();

/* The last 7 days: GPUs the team held (the cluster history sampled every minute, GET
 * /api/v1/cluster/history/?range=7d, this team's by_team series) against its guarantee and maximum. */
(function () {
  "use strict";
  const target = document.getElementById("week-chart");
  if (!target || !window.Charts || !window.Portal) return;
  const note = document.getElementById("week-note");
  const slug = target.dataset.team;
  const guarantee = Number(target.dataset.guarantee) / 1000;
  const maximum = Number(target.dataset.maximum) / 1000;
  window.Portal.api("/api/v1/cluster/history/?range=7d").then(function (answer) {
    if (!answer.ok) { note.textContent = (answer.data && answer.data.message) || "The cluster history cannot be loaded."; return; }
    const points = answer.data.points || [];
    if (!points.length) { target.hidden = true; note.textContent = "No history has been sampled in the last 7 days."; return; }
    const x = points.map(function (p) { return Date.parse(p.t) / 1000; });
    const held = points.map(function (p) { const t = (p.by_team || {})[slug]; return t ? t.allocated_milli / 1000 : 0; });
    const waiting = points.map(function (p) { const t = (p.by_team || {})[slug]; return t ? t.waiting : 0; });
    window.Charts.line(target, {
      x: x, yLabel: "GPUs", height: 240,
      series: [
        { label: "GPUs held", values: held, color: "#1f5fbf" },
        { label: "Guarantee", values: x.map(function () { return guarantee; }), color: "#15803d" },
        { label: "Maximum", values: x.map(function () { return maximum; }), color: "#b91c1c" },
        { label: "Jobs waiting", values: waiting, color: "#a16207" },
      ],
    });
    const peak = Math.max.apply(null, held);
    note.textContent = "Peak: " + (Math.round(peak * 100) / 100) + " GPUs held; a point every " + Math.round(answer.data.step_s / 60) + " minutes.";
  });
})();
