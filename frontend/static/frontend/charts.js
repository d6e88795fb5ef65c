/* The portal's charts: a thin layer over uPlot (served from its PyPI package at /vendor/uplot.min.js,
 * loaded by the template include frontend/_charts.html). Two shapes cover every page:
 *
 *   Charts.line(target, {x: [unix seconds...], series: [{label, values, color}], yLabel, height, minSpan})
 *     a time series (x in seconds since 1970, as uPlot wants), one line per series, step-shaped, the
 *     x-axis at least minSpan seconds wide (60 unless given);
 *   Charts.bars(target, {labels: ["Dec 1", ...], series: [{label, values, color, line}], yLabel, height})
 *     categories on x; the first series as bars, any with ``line: true`` as lines over them (one bar
 *     series per chart: side-by-side bars read badly at phone width).
 *
 * Both return {update(data), destroy()}; Charts.of(target) is the uPlot instance drawn there. update takes the same object and redraws in place. Charts
 * follow the width of their target (ResizeObserver). Nothing here writes inline <style> or scripts:
 * uPlot styles its elements through the CSSOM, which the CSP allows, and its rules are in uplot.min.css.
 */
(function () {
  "use strict";
  const FONT = "12px system-ui, sans-serif";
  const AXIS = { stroke: "#4b5563", font: FONT, grid: { stroke: "#e5e7eb", width: 1 }, ticks: { stroke: "#d1d5db", width: 1 } };

  function widthOf(target) {
    return Math.max(200, Math.floor(target.getBoundingClientRect().width || target.clientWidth || 600));
  }

  function follow(target, plot) {
    if (!window.ResizeObserver) return null;
    const observer = new ResizeObserver(function () {
      const w = widthOf(target);
      if (Math.abs(w - plot.width) > 1) plot.setSize({ width: w, height: plot.height });
    });
    observer.observe(target);
    return observer;
  }

  function yAxis(label) {
    return Object.assign({}, AXIS, { label: label || "", labelFont: FONT, size: 56,
      values: function (u, splits) { return splits.map(function (v) { return v === null ? "" : String(Math.round(v * 100) / 100); }); } });
  }

  // target element -> its uPlot instance, for tests and for pages that read what a chart shows.
  const instances = new WeakMap();

  function build(target, opts, data) {
    if (!window.uPlot) throw new Error("uPlot is not loaded: include frontend/_charts.html in the page.");
    target.replaceChildren();
    const plot = new window.uPlot(Object.assign({ width: widthOf(target) }, opts), data, target);
    const observer = follow(target, plot);
    instances.set(target, plot);
    return { plot: plot, observer: observer };
  }

  function line(target, spec) {
    let current = spec;  // read by the x range, so update() with another minSpan takes effect
    function data(s) { return [s.x].concat(s.series.map(function (x) { return x.values; })); }
    function options(s) {
      return {
        height: s.height || 260,
        scales: {
          // At least minSpan seconds wide (default a minute), so a few samples do not make sub-second ticks.
          x: { time: true, range: function (u, lo, hi) {
            const span = current.minSpan || 60;
            return hi - lo < span ? [hi - span, hi] : [lo, hi];
          } },
          y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } },
        },
        axes: [Object.assign({}, AXIS), yAxis(s.yLabel)],
        series: [{ label: "Time" }].concat(s.series.map(function (x) {
          return { label: x.label, stroke: x.color, width: 2, paths: window.uPlot.paths.stepped({ align: 1 }),
            points: { show: false }, spanGaps: false };
        })),
        legend: { live: true },
      };
    }
    let state = build(target, options(spec), data(spec));
    let shape = spec.series.map(function (s) { return s.label; }).join("|");
    return {
      update: function (next) {
        current = next;
        const nextShape = next.series.map(function (s) { return s.label; }).join("|");
        if (nextShape !== shape) {
          this.destroy();
          state = build(target, options(next), data(next));
          shape = nextShape;
          return;
        }
        state.plot.setData(data(next));
      },
      destroy: function () { if (state.observer) state.observer.disconnect(); state.plot.destroy(); },
      get plot() { return state.plot; },
    };
  }

  function bars(target, spec) {
    function data(s) {
      return [s.labels.map(function (_, i) { return i; })].concat(s.series.map(function (x) { return x.values; }));
    }
    function options(s) {
      const n = s.labels.length;
      return {
        height: s.height || 260,
        scales: {
          x: { time: false, range: function () { return [-0.5, Math.max(0.5, n - 0.5)]; } },
          y: { range: function (u, lo, hi) { return [0, Math.max(1, (hi || 0) * 1.1)]; } },
        },
        axes: [
          Object.assign({}, AXIS, {
            // One tick per category, thinned so labels never overlap.
            splits: function (u) {
              const every = Math.max(1, Math.ceil(n / Math.max(1, Math.floor(u.bbox.width / devicePixelRatio / 56))));
              const out = [];
              for (let i = 0; i < n; i += every) out.push(i);
              return out;
            },
            values: function (u, splits) { return splits.map(function (i) { return s.labels[i] === undefined ? "" : s.labels[i]; }); },
            grid: { show: false },
          }),
          yAxis(s.yLabel),
        ],
        series: [{ label: s.xLabel || "", value: function (u, i) { return i === null || s.labels[i] === undefined ? "" : s.labels[i]; } }].concat(s.series.map(function (x) {
          if (x.line) {
            return { label: x.label, stroke: x.color, width: 2, points: { show: true, size: 5 } };
          }
          return {
            label: x.label, stroke: x.color, fill: x.color, width: 0,
            paths: window.uPlot.paths.bars({ size: [0.6, 48] }),
            points: { show: false },
          };
        })),
        legend: { live: true },
      };
    }
    let state = build(target, options(spec), data(spec));
    return {
      update: function (next) { this.destroy(); spec = next; state = build(target, options(next), data(next)); },
      destroy: function () { if (state.observer) state.observer.disconnect(); state.plot.destroy(); },
      get plot() { return state.plot; },
    };
  }

  window.Charts = { line: line, bars: bars, of: function (target) { return instances.get(target) || null; } };
})();
