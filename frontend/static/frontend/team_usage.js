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
