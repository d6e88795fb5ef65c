/* Team page: GPU-hours per day of this month (bars, one per calendar day, the days still to come
 * empty) and the running total (a line on the same axis), drawn with the portal's charts (uPlot) from
 * the data the page embeds (frontend.selectors.daily_gpu_hours). */
(function () {
  "use strict";
  const source = document.getElementById("hours-data");
  const target = document.getElementById("hours-chart");
  if (!source || !target || !window.Charts) return;
  const data = JSON.parse(source.textContent);
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  // ISO dates (UTC days): read the parts, so no time zone moves a day across midnight.
  const first = (data.days[0] || new Date().toISOString().slice(0, 10)).split("-").map(Number);
  const inMonth = new Date(Date.UTC(first[0], first[1], 0)).getUTCDate();
  const labels = [];
  const hours = [];
  const total = [];
  let sum = 0;
  for (let d = 1; d <= inMonth; d++) {
    labels.push(MONTHS[first[1] - 1] + " " + d);
    const i = d - first[2];
    if (i >= 0 && i < data.hours.length) {
      sum += data.hours[i];
      hours.push(data.hours[i]);
      total.push(Math.round(sum * 1000) / 1000);
    } else {
      hours.push(null);
      total.push(null);
    }
  }
  window.Charts.bars(target, {
    labels: labels, xLabel: "Day", yLabel: "GPU-hours", height: 280,
    series: [
      { label: "GPU-hours per day", values: hours, color: "#1f5fbf" },
      { label: "Total this month", values: total, color: "#c2410c", line: true },
    ],
  });
  const note = document.getElementById("hours-note");
  if (note) note.textContent = "Total so far: " + (Math.round(sum * 100) / 100) + " of " + data.budget + " GPU-hours budgeted this month.";
})();
