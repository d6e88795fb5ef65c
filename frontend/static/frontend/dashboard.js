/* Cluster dashboard: GPU map and headline numbers from GET /api/v1/cluster/, the queue from
 * GET /api/v1/jobs/?status=QUEUED, cluster-wide job counts from GET /portal/summary, and a chart of
 * the cluster's persisted history (GET /api/v1/cluster/history/?range=1h|1d|7d|30d). */
(function () {
  "use strict";
  const P = window.Portal;
  const el = P.el;
  const INTERVAL_MS = 3000;
  const SVG = "http://www.w3.org/2000/svg";

  let lastClusterJson = "";
  let colors = new Map();  // key -> look, for the keys on the map now (renderMap)

  /* Share of the free GPU capacity that sits on GPUs already partly in use: a job asking for a whole
   * GPU cannot use it. 0% = every free milli-GPU is on an idle GPU. */
  function fragmentation(cluster) {
    let free = 0;
    let stranded = 0;
    for (const node of cluster.nodes) {
      for (const gpu of node.gpus) {
        const f = Math.max(0, 1000 - gpu.used_milli);
        free += f;
        if (gpu.used_milli > 0 && f > 0) stranded += f;
      }
    }
    return free ? stranded / free : 0;
  }

  function allocationKey(a) {
    return a.job_id !== null && a.job_id !== undefined ? "job " + a.job_id : "team " + (a.team || "unknown");
  }

  function allocationText(a) {
    const who = a.job_id !== null && a.job_id !== undefined ? "job " + a.job_id + (a.team ? " (" + a.team + ")" : "") : "a job of team " + (a.team || "unknown");
    const mem = a.gpu_memory_mib ? ", " + a.gpu_memory_mib + " MiB" : "";
    return who + ": " + a.gpu_milli + " milli-GPU" + mem;
  }

  /* NVLink peers of each GPU, from the printed link matrix ("NV2" = 2 links). */
  function nvlinks(topology) {
    const links = (topology && topology.links) || [];
    const edges = [];
    for (let i = 0; i < links.length; i++) {
      for (let j = i + 1; j < links[i].length; j++) {
        const cell = String(links[i][j] || "");
        if (cell.startsWith("NV")) edges.push([i, j, parseInt(cell.slice(2), 10) || 1]);
      }
    }
    return edges;
  }

  /* NVLink groups: the largest sets of GPUs in which every pair has a direct NVLink (maximal cliques,
   * Bron-Kerbosch, then chosen greedily without overlap). DGX-1's hybrid cube-mesh gives two quads,
   * an NVSwitch board one group of all GPUs, PCIe-only nodes none. */
  function nvlinkGroups(count, edges) {
    const adj = Array.from({ length: count }, function () { return new Set(); });
    for (const e of edges) { adj[e[0]].add(e[1]); adj[e[1]].add(e[0]); }
    const cliques = [];
    (function bk(r, p, x) {
      if (!p.length && !x.length) { if (r.length > 1) cliques.push(r.slice().sort(function (a, b) { return a - b; })); return; }
      for (const v of p.slice()) {
        bk(r.concat([v]), p.filter(function (u) { return adj[v].has(u); }), x.filter(function (u) { return adj[v].has(u); }));
        p = p.filter(function (u) { return u !== v; });
        x = x.concat([v]);
      }
    })([], Array.from({ length: count }, function (_, i) { return i; }), []);
    cliques.sort(function (a, b) { return b.length - a.length || a[0] - b[0]; });
    const used = new Set();
    const groups = [];
    for (const c of cliques) {
      if (c.some(function (g) { return used.has(g); })) continue;
      c.forEach(function (g) { used.add(g); });
      groups.push(c);
    }
    return groups.sort(function (a, b) { return a[0] - b[0]; });
  }

  // Neutral tones and letters, so groups are never mistaken for the job colours of the segments.
  const GROUP_COLORS = ["#1e293b", "#64748b", "#334155", "#94a3b8"];
  const GROUP_NAMES = "ABCDEFGH";

  function groupOf(groups, gpuIndex) {
    for (let i = 0; i < groups.length; i++) if (groups[i].includes(gpuIndex)) return i;
    return -1;
  }

  function range(group) {
    const contiguous = group.every(function (g, i) { return i === 0 || g === group[i - 1] + 1; });
    return contiguous && group.length > 2 ? group[0] + "–" + group[group.length - 1] : group.join(",");
  }

  function topologyFigure(node) {
    const count = node.gpus.length;
    const edges = nvlinks(node.topology);
    const groups = nvlinkGroups(count, edges);
    const wrap = el("figure", { class: "topo" });
    if (!count) return wrap;
    const size = 92;
    const r = count > 2 ? 32 : 0;
    const pos = node.gpus.map(function (_, i) {
      if (count <= 2) return [count === 1 ? size / 2 : 26 + i * 40, size / 2 - 20];
      const angle = -Math.PI / 2 + (2 * Math.PI * i) / count;
      return [size / 2 + r * Math.cos(angle), size / 2 + r * Math.sin(angle)];
    });
    const height = count <= 2 ? 52 : size;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + size + " " + height);
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    for (const e of edges) {
      const line = document.createElementNS(SVG, "line");
      line.setAttribute("x1", pos[e[0]][0]); line.setAttribute("y1", pos[e[0]][1]);
      line.setAttribute("x2", pos[e[1]][0]); line.setAttribute("y2", pos[e[1]][1]);
      const ga = groupOf(groups, e[0]);
      const same = ga >= 0 && ga === groupOf(groups, e[1]);
      line.setAttribute("stroke", same ? GROUP_COLORS[ga % GROUP_COLORS.length] : "#a3acb9");
      if (!same) line.setAttribute("stroke-dasharray", "3 2");
      line.setAttribute("stroke-width", String(0.8 + e[2] * 0.9));
      line.setAttribute("class", "nvlink");
      svg.appendChild(line);
    }
    node.gpus.forEach(function (gpu, i) {
      const g = document.createElementNS(SVG, "g");
      const c = document.createElementNS(SVG, "circle");
      c.setAttribute("cx", pos[i][0]); c.setAttribute("cy", pos[i][1]); c.setAttribute("r", "8");
      c.setAttribute("fill", gpu.used_milli >= 1000 ? "#14233a" : gpu.used_milli > 0 ? "#5b7fb5" : "#ffffff");
      const gi = groupOf(groups, gpu.index);
      c.setAttribute("stroke", gi >= 0 ? GROUP_COLORS[gi % GROUP_COLORS.length] : "#14233a");
      c.setAttribute("stroke-width", "2");
      const t = document.createElementNS(SVG, "text");
      t.setAttribute("x", pos[i][0]); t.setAttribute("y", pos[i][1] + 3.5);
      t.setAttribute("text-anchor", "middle"); t.setAttribute("font-size", "9");
      t.setAttribute("fill", gpu.used_milli > 0 ? "#ffffff" : "#14233a");
      t.textContent = String(gpu.index);
      g.appendChild(c); g.appendChild(t); svg.appendChild(g);
    });
    wrap.appendChild(svg);
    let note;
    if (!node.topology) note = "topology unknown";
    else if (!edges.length) {
      const cell = node.topology.links && node.topology.links[0] && node.topology.links[0][1];
      note = "no NVLink" + (cell ? " (PCIe " + cell + ")" : "");
    } else {
      note = "NVLink groups: " + groups.map(function (g, i) { return GROUP_NAMES[i % 8] + " {" + range(g) + "}"; }).join(", ");
      if (groups.length > 1) note += ", linked across";
    }
    wrap.appendChild(el("figcaption", { class: "topo-note", text: note }));
    return wrap;
  }

  function gpuItem(node, gpu, links, groups) {
    const segs = el("div", { class: "gpu-bar" });
    const texts = [];
    for (const a of gpu.allocations) {
      const key = allocationKey(a);
      const look = colors.get(key) || { color: "#5a6675", pattern: "", image: "" };
      texts.push(allocationText(a));
      const own = a.job_id !== null && a.job_id !== undefined;
      // Your own jobs' segments link to the job (mouse); keyboard users get the tile's description.
      segs.appendChild(el(own ? "a" : "span", {
        class: "seg",
        href: own ? "/jobs/" + a.job_id + "/" : null,
        tabindex: own ? "-1" : null,
        title: allocationText(a),
        "data-job-id": a.job_id === null || a.job_id === undefined ? "" : a.job_id,
        "data-team": a.team || "",
        "data-milli": a.gpu_milli,
        "data-key": key,
        "data-pattern": look.pattern,
        style: { width: Math.min(100, a.gpu_milli / 10) + "%", backgroundColor: look.color, backgroundImage: look.image, backgroundSize: look.pattern === "dots" ? "5px 5px" : "" },
      }, [el("span", { class: "seg-label", text: own ? "#" + a.job_id : a.team || "" })]));
    }
    const memPct = gpu.memory_mib ? Math.min(100, (100 * gpu.used_memory_mib) / gpu.memory_mib) : 0;
    const hasUtil = typeof gpu.utilization_pct === "number";
    const peers = links.filter(function (e) { return e[0] === gpu.index || e[1] === gpu.index; })
      .map(function (e) { return "GPU " + (e[0] === gpu.index ? e[1] : e[0]) + " ×" + e[2]; });
    const gi = groupOf(groups, gpu.index);
    const label = "GPU " + gpu.index + " of " + node.name + (gi >= 0 ? " (NVLink group " + GROUP_NAMES[gi % 8] + ": GPUs " + range(groups[gi]) + ")" : "") + ": " + gpu.used_milli + " of 1000 milli-GPU allocated, " +
      gpu.used_memory_mib + " of " + gpu.memory_mib + " MiB memory" + (hasUtil ? ", utilisation " + gpu.utilization_pct + "%" : "") +
      (texts.length ? "; " + texts.join("; ") : "; free") + (peers.length ? "; NVLink to " + peers.join(", ") : "");
    return el("li", {
      class: "gpu", tabindex: "0", "aria-label": label, title: label,
      "data-node": node.name, "data-gpu": gpu.index, "data-used-milli": gpu.used_milli,
    }, [
      el("span", { class: "gpu-label", text: "GPU " + gpu.index + (gi >= 0 && groups.length > 1 ? " " + GROUP_NAMES[gi % 8] : ""),
        style: gi >= 0 ? { borderLeft: "4px solid " + GROUP_COLORS[gi % GROUP_COLORS.length], paddingLeft: "3px" } : { paddingLeft: "7px" } }),
      el("div", { class: "gpu-bars" }, [segs, el("div", { class: "mem-bar" }, [el("span", { style: { width: memPct + "%" } })])]),
      // Allocated (what jobs hold) and utilisation (what the GPU measured) are different numbers.
      el("span", { class: "gpu-pct" }, [
        el("span", { class: "alloc", title: "allocated to jobs", text: Math.round(gpu.used_milli / 10) + "% alloc" }),
        hasUtil ? el("span", { class: "util", title: "measured utilisation", text: gpu.utilization_pct + "% util" }) : null,
      ]),
    ]);
  }

  function nodeCard(node) {
    const links = nvlinks(node.topology);
    const groups = nvlinkGroups(node.gpus.length, links);
    const cpu = Math.round(node.used_cpu_milli / 1000) + "/" + Math.round(node.cpu_milli / 1000) + " CPU";
    const mem = Math.round(node.used_memory_mib / 1024) + "/" + Math.round(node.memory_mib / 1024) + " GiB";
    const meta = [node.gpu_model || "no GPU", node.gpus.length + " GPU" + (node.gpus.length === 1 ? "" : "s"), cpu, mem];
    if (node.driver_version) meta.push("driver " + node.driver_version);
    if (!node.schedulable) meta.push("not schedulable");
    return el("article", { class: "node" + (node.schedulable ? "" : " unschedulable"), id: "node-" + node.name, "data-node": node.name, "aria-label": "Node " + node.name }, [
      el("h3", { text: node.name + (node.virtual ? " (virtual GPUs)" : "") }),
      el("p", { class: "node-meta", text: meta.join(" · ") }),
      el("div", { class: "node-body" }, [
        el("ul", { class: "gpus", "aria-label": "GPUs of " + node.name }, node.gpus.map(function (g) { return gpuItem(node, g, links, groups); })),
        topologyFigure(node),
      ]),
    ]);
  }

  /* Jobs in numeric order, then teams: the legend's order and the palette's. */
  function legendKeys(cluster) {
    const keys = new Set();
    for (const node of cluster.nodes) for (const gpu of node.gpus) for (const a of gpu.allocations) keys.add(allocationKey(a));
    const all = Array.from(keys);
    const jobs = all.filter(function (k) { return k.startsWith("job "); }).sort(P.byNumber);
    const teams = all.filter(function (k) { return !k.startsWith("job "); }).sort(P.byNumber);
    return jobs.concat(teams);
  }

  /* A segment's label stays only where it fits whole. */
  function fitLabels(map) {
    map.querySelectorAll(".seg-label").forEach(function (label) {
      label.hidden = false;
      if (label.scrollWidth > label.parentElement.clientWidth - 2) label.hidden = true;
    });
  }

  function renderMap(cluster) {
    const map = document.getElementById("gpu-map");
    const keys = legendKeys(cluster);
    colors = P.palette(keys);
    map.replaceChildren.apply(map, cluster.nodes.map(nodeCard));
    map.setAttribute("aria-busy", "false");
    requestAnimationFrame(function () { fitLabels(map); });
    const legend = document.getElementById("map-legend");
    const items = keys.map(function (k) {
      const look = colors.get(k);
      return el("span", { "data-key": k }, [el("i", { class: "swatch", style: { backgroundColor: look.color, backgroundImage: look.image, backgroundSize: look.pattern === "dots" ? "5px 5px" : "" } }), k]);
    });
    items.push(el("span", {}, [el("i", { class: "swatch", style: { background: "#e6eaf0" } }), "free"]));
    legend.replaceChildren.apply(legend, items);
  }

  function renderStats(cluster, counts) {
    const t = cluster.totals;
    document.getElementById("stat-allocated").textContent = P.gpus(t.used_gpu_milli) + " / " + t.gpus;
    document.getElementById("stat-allocated-detail").textContent =
      (t.gpu_milli ? Math.round((100 * t.used_gpu_milli) / t.gpu_milli) : 0) + "% of the cluster's GPU capacity";
    document.getElementById("stat-fragmentation").textContent = Math.round(100 * fragmentation(cluster)) + "%";
    document.getElementById("stat-tasks").textContent = cluster.running_tasks + " task(s) on " + cluster.backend;
    if (counts) {
      document.getElementById("stat-running").textContent = counts.running;
      document.getElementById("stat-waiting").textContent = counts.waiting;
      document.getElementById("stat-preemptions").textContent = counts.preemptions;
      document.getElementById("stat-migrations").textContent = counts.migrations;
      document.getElementById("stat-preempting").textContent = counts.preempting
        ? counts.preempting + " being preempted now" : "jobs stopped for others, all teams";
    }
  }

  function renderQueue(jobs, counts) {
    const body = document.querySelector("#queue-table tbody");
    jobs.sort(function (a, b) { return (a.queue_position || 1e9) - (b.queue_position || 1e9); });
    const rows = jobs.map(function (job) {
      return el("tr", { "data-job-id": job.id }, [
        el("td", { text: job.queue_position ? "#" + job.queue_position : "–" }),
        el("td", {}, [el("a", { href: "/jobs/" + job.id + "/", text: job.id + " " + (job.name || "") })]),
        el("td", { text: job.team_slug }),
        el("td", { text: P.asks(job) + (job.replicas > 1 ? " ×" + job.replicas : "") }),
        el("td", { class: "reason", text: (job.pending_reason || "waiting for the next scheduling cycle") +
          (job.eta ? "; expected to start " + new Date(job.eta).toLocaleString() + " (" + job.eta_confidence + " confidence)" : "") }),
      ]);
    });
    if (!rows.length) rows.push(el("tr", {}, [el("td", { colspan: "5", text: "None of your teams' jobs is waiting." })]));
    body.replaceChildren.apply(body, rows);
    const hidden = counts ? Math.max(0, counts.waiting - jobs.length) : 0;
    document.getElementById("queue-note").textContent = "Your teams' waiting jobs, in queue order" +
      (hidden ? "; " + hidden + " more belong to other teams." : ".");
    const order = document.getElementById("queue-order");
    order.textContent = counts && counts.queue_order ? "Ordered by: " + counts.queue_order : "";
    order.hidden = !order.textContent;
  }

  // The persisted history (GET /api/v1/cluster/history/), re-read every minute (it is sampled once a
  // minute) and whenever another range is picked.
  const RANGE_SECONDS = { "1h": 3600, "1d": 86400, "7d": 7 * 86400, "30d": 30 * 86400 };
  const HISTORY_MS = 60000;
  let historyRange = "1d";
  let chart = null;

  async function loadHistory() {
    const answer = await P.api("/api/v1/cluster/history/?range=" + encodeURIComponent(historyRange));
    const note = document.getElementById("history-note");
    const target = document.getElementById("history-chart");
    if (!answer.ok) { note.textContent = (answer.data && answer.data.message) || "The history is unavailable."; return true; }
    const points = answer.data.points || [];
    target.dataset.points = String(points.length);
    target.dataset.range = answer.data.range;
    note.textContent = points.length
      ? points.length + " point" + (points.length === 1 ? "" : "s") + ", one per " + Math.round(answer.data.step_s / 60) + " min (means of the samples in each)."
      : "No samples in this range yet: the platform samples the cluster every minute.";
    if (!window.Charts) return true;
    const gpus = function (key) { return points.map(function (p) { return Math.round(p[key]) / 1000; }); };
    const spec = {
      x: points.map(function (p) { return Date.parse(p.t) / 1000; }), yLabel: "GPUs / jobs", height: 260,
      minSpan: RANGE_SECONDS[historyRange],
      series: [
        { label: "GPU capacity", values: gpus("capacity_milli"), color: "#94a3b8" },
        { label: "GPUs allocated", values: gpus("allocated_milli"), color: "#1f5fbf" },
        { label: "Jobs running", values: points.map(function (p) { return p.running; }), color: "#15803d" },
        { label: "Jobs waiting", values: points.map(function (p) { return p.waiting; }), color: "#c2410c" },
      ],
    };
    if (chart) chart.update(spec);
    else chart = window.Charts.line(target, spec);
    return true;
  }

  const historyPoller = P.poll(loadHistory, HISTORY_MS);
  document.querySelectorAll(".range-picker button").forEach(function (button) {
    button.addEventListener("click", function () {
      historyRange = button.dataset.range;
      document.querySelectorAll(".range-picker button").forEach(function (b) { b.setAttribute("aria-pressed", b === button ? "true" : "false"); });
      historyPoller.now();
    });
  });

  async function refresh() {
    const [cluster, summary, queue] = await Promise.all([
      P.api("/api/v1/cluster/"),
      P.api("/portal/summary"),
      P.api("/api/v1/jobs/?status=QUEUED&page_size=100&ordering=-priority"),
    ]);
    const note = document.getElementById("refresh-note");
    if (!cluster.ok) {
      note.textContent = (cluster.data && cluster.data.message) || "The cluster view is unavailable.";
      return true;
    }
    const counts = summary.ok ? summary.data : null;
    const json = JSON.stringify(cluster.data);
    if (json !== lastClusterJson) {
      lastClusterJson = json;
      renderMap(cluster.data);
    }
    renderStats(cluster.data, counts);
    if (queue.ok) renderQueue(queue.data.results, counts);
    note.textContent = "Updated " + new Date().toLocaleTimeString() + "; refreshes every " + INTERVAL_MS / 1000 + " s.";
    return true;
  }

  P.poll(refresh, INTERVAL_MS);
  window.addEventListener("resize", function () { fitLabels(document.getElementById("gpu-map")); });
})();
