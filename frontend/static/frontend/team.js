/* Team page: GPU-hours per day this month (bars) and the running total against the monthly budget
 * (line), drawn with plotly.js from the data the page embeds (frontend.selectors.daily_gpu_hours). */
(function () {
  "use strict";
  const source = document.getElementById("hours-data");
  const target = document.getElementById("hours-chart");
  if (!source || !target || !window.Plotly) return;
  const data = JSON.parse(source.textContent);
  let total = 0;
  const cumulative = data.hours.map(function (h) { total += h; return Math.round(total * 1000) / 1000; });
  const traces = [
    { type: "bar", x: data.days, y: data.hours, name: "GPU-hours per day", marker: { color: "#1f5fbf" } },
    { type: "scatter", mode: "lines+markers", x: data.days, y: cumulative, name: "Total this month", yaxis: "y2", line: { color: "#c2410c", width: 2 } },
  ];
  window.Plotly.newPlot(target, traces, {
    margin: { l: 60, r: 80, t: 10, b: 50 }, height: 300, bargap: 0.2,
    legend: { orientation: "h", y: -0.25 },
    yaxis: { title: { text: "per day" }, rangemode: "tozero", exponentformat: "none" },
    yaxis2: { title: { text: "total (budget " + data.budget + ")" }, overlaying: "y", side: "right", rangemode: "tozero", exponentformat: "none", showgrid: false },
    paper_bgcolor: "#ffffff", plot_bgcolor: "#ffffff", font: { family: "system-ui, sans-serif", color: "#1b2430" },
  }, { displayModeBar: false, responsive: true });
})();
