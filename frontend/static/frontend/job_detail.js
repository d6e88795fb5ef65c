/* Job detail: the job and its events from /api/v1/jobs/{id}/..., polled until the job ends; its logs
 * live from the server-sent events of logs/?follow=1 (whole-log polling only where EventSource fails);
 * link classes between a task's GPUs from the node topology in GET /api/v1/cluster/; cancel and clone. */
(function () {
  "use strict";
  const P = window.Portal;
  const el = P.el;
  const root = document.getElementById("job-root");
  const jobId = root.dataset.jobId;
  const base = "/api/v1/jobs/" + jobId + "/";
  const TERMINAL = ["SUCCEEDED", "FAILED", "STOPPED"];
  const $ = function (id) { return document.getElementById(id); };
  let topologies = {};
  let placedKey = "";
  let lastLog = "";
  let cancelAsked = false;

  function say(text, kind) {
    const box = $("action-message");
    box.className = "alert" + (kind ? " " + kind : "");
    box.textContent = text;
    box.hidden = !text;
  }

  function renderJob(job) {
    const badge = $("job-status");
    if (badge.textContent !== job.status) {
      badge.textContent = job.status;
      badge.className = "badge badge-" + job.status.toLowerCase();
    }
    $("job-name").textContent = job.name || "(unnamed)";
    // Shell-quoted as typed: python -c 'import os; ...' keeps its quotes.
    $("job-command").textContent = P.shellJoin([].concat(job.command, job.args || []));
    $("job-asks").textContent = P.asks(job) + ", " + job.cpu_milli / 1000 + " CPU, " + job.memory_mib + " MiB memory" +
      (job.max_runtime_seconds ? ", at most " + job.max_runtime_seconds + " s" : "");
    $("job-queue").textContent = job.status === "QUEUED" ? queueText(job) : job.pending_reason || "–";
    $("job-preemptible").textContent = (job.preemptible
      ? "may be preempted" + (job.min_runtime_seconds ? " after " + job.min_runtime_seconds + " s of each run" : "")
      : "never preempted") + (job.preemption_grace_seconds !== null && job.preemption_grace_seconds !== undefined
      ? "; " + job.preemption_grace_seconds + " s grace" : "; platform default grace") +
      (job.allow_sharing ? "; may share its GPU" : "");
    $("job-attained").textContent = (job.attained_gpu_seconds / 3600).toFixed(3) + " GPU-hours" +
      (typeof job.las_level === "number" ? " (LAS level " + job.las_level + "; lower levels are served first)" : "");
    if (job.eta) $("job-queue").textContent = ($("job-queue").textContent || "") + "; expected to start " +
      new Date(job.eta).toLocaleString() + " (" + job.eta_confidence + " confidence)";
    $("job-priority").textContent = job.priority + (job.priority_class ? " (" + job.priority_class + ")" : "");
    $("job-borrowed").textContent = job.borrowed_gpu_milli
      ? job.borrowed_gpu_milli / 1000 + " GPU(s) beyond the team's guarantee: borrowed, reclaimed if the lender needs them"
      : "none";
    $("job-preemptions").textContent = job.preemptions + " preemption(s), " + job.migrations + " of them migration(s)";
    $("job-time-lost").textContent = job.time_lost_seconds ? Math.round(job.time_lost_seconds) + " s (grace periods and restarts)" : "–";
    renderPreemptions(job.preemption_history || []);
    $("job-failure").textContent = job.failure_category ? job.failure_category + ": " + job.failure_message : "–";
    $("job-created").replaceChildren(P.timeEl(job.created_at));
    $("job-started").replaceChildren(P.timeEl(job.started_at));
    $("job-finished").replaceChildren(P.timeEl(job.finished_at));
    const cancel = $("cancel-button");
    if (cancel) cancel.hidden = TERMINAL.includes(job.status) || job.status === "STOPPING";
    // The cancel note follows the job: "requested" while it stops, then what it ended as.
    if (cancelAsked) {
      if (TERMINAL.includes(job.status)) say("Cancelled: the job is " + job.status + ".", "ok");
      else say("Cancel requested: the job is " + job.status + " while its tasks stop.", "ok");
    }
  }

  /* The queue line: the position once, then the reason (which may already start with "#3 in queue"). */
  function queueText(job) {
    const reason = job.pending_reason || "Waiting for the next scheduling cycle.";
    if (!job.queue_position || /^#\d+ in (the )?queue/i.test(reason)) return reason;
    return "#" + job.queue_position + " in the queue: " + reason;
  }

  /* A task's phase as the page shows it: the tasks of a cancelled job were stopped, not failed
   * (the backend reports a deleted task as failed). */
  function taskPhase(job, task) {
    return (job.status === "STOPPED" || job.status === "STOPPING") && task.phase === "FAILED" ? "STOPPED" : task.phase;
  }

  function renderPreemptions(history) {
    const body = document.querySelector("#preemption-table tbody");
    body.replaceChildren.apply(body, history.map(function (p) {
      return el("tr", {}, [
        el("td", {}, [P.timeEl(p.at)]),
        el("td", { text: p.kind }),
        el("td", {}, [el("code", { text: p.rule || "–" })]),
        el("td", {}, p.preemptor ? [el("a", { href: "/jobs/" + p.preemptor + "/", text: "#" + p.preemptor })] : ["–"]),
        el("td", {}, p.stopped_at ? [P.timeEl(p.stopped_at)] : ["stopping…"]),
        el("td", { class: "reason", text: p.reason }),
      ]);
    }));
    $("preemption-note").textContent = history.length
      ? "Each run after a preemption resumes from the job's checkpoint folder (RESUME=1)."
      : "Never preempted.";
  }

  function linksBetween(task) {
    const topo = topologies[task.node];
    const idx = task.gpu_indices || [];
    if (idx.length < 2) return idx.length ? "one GPU" : "–";
    if (!topo || !topo.links) return "unknown";
    const pairs = [];
    for (let a = 0; a < idx.length; a++) {
      for (let b = a + 1; b < idx.length; b++) {
        const row = topo.links[idx[a]];
        pairs.push("GPU" + idx[a] + "–GPU" + idx[b] + " " + (row ? row[idx[b]] : "?"));
      }
    }
    return pairs.join(", ");
  }

  function renderTasks(job) {
    const body = document.querySelector("#placement-table tbody");
    const tasks = job.tasks || [];
    const rows = tasks.map(function (task) {
      const share = task.gpu_milli && task.gpu_milli < 1000
        ? task.gpu_milli + " milli-GPU" + (task.gpu_memory_mib ? ", " + task.gpu_memory_mib + " MiB" : "")
        : (task.gpu_indices || []).length ? "whole GPU" + ((task.gpu_indices || []).length > 1 ? "s" : "") : "–";
      const slowdown = typeof task.predicted_slowdown === "number" ? "×" + task.predicted_slowdown.toFixed(2) : "not predicted";
      return el("tr", { "data-task": task.name, "data-node": task.node, "data-gpus": (task.gpu_indices || []).join(",") }, [
        el("td", { text: task.name }),
        el("td", {}, [P.badge(taskPhase(job, task))]),
        el("td", {}, task.node ? [el("a", { href: "/#node-" + task.node, text: task.node })] : ["–"]),
        el("td", { text: (task.gpu_indices || []).join(", ") || "–" }),
        el("td", { text: share }),
        el("td", { text: linksBetween(task) }),
        el("td", { class: "slowdown", text: slowdown }),
        el("td", { class: "reason", text: task.placement_reason || task.message || "" }),
      ]);
    });
    body.replaceChildren.apply(body, rows);
    $("placement-note").textContent = tasks.length
      ? tasks.length + " task(s). Predicted slowdown is the scheduler's estimate of how much slower the task runs next to the jobs sharing its GPUs."
      : "Not placed yet.";
    const select = $("log-task");
    if (select.options.length !== tasks.length + 1) {
      const keep = select.value;
      select.replaceChildren.apply(select, [el("option", { value: "", text: "All tasks" })].concat(
        tasks.map(function (t) { return el("option", { value: t.index, text: t.name }); })));
      select.value = keep;
    }
  }

  function renderEvents(events) {
    const list = $("job-timeline");
    if (list.children.length === events.length) return;
    list.replaceChildren.apply(list, events.map(function (ev) {
      return el("li", { "data-to": ev.to_status }, [
        P.timeEl(ev.created_at),
        el("strong", { text: (ev.from_status ? ev.from_status + " → " : "") + ev.to_status }),
        " by " + ev.actor,
        ev.reason ? el("div", { class: "muted small", text: ev.reason }) : null,
      ]);
    }));
  }

  async function loadTopology(job) {
    const key = (job.tasks || []).map(function (t) { return t.node; }).join(",");
    if (!key || key === placedKey) return;
    placedKey = key;
    const answer = await P.api("/api/v1/cluster/");
    if (!answer.ok) return;
    topologies = {};
    for (const node of answer.data.nodes) topologies[node.name] = node.topology;
  }

  async function loadLogs() {
    const task = $("log-task").value;
    const answer = await P.api(base + "logs/" + (task !== "" ? "?task=" + encodeURIComponent(task) : ""));
    const pre = $("job-logs");
    if (!answer.ok) { $("logs-note").textContent = (answer.data && answer.data.message) || "Logs are unavailable right now."; return; }
    const text = answer.data.tasks.map(function (t) {
      return (answer.data.tasks.length > 1 ? "== " + t.task + " (" + t.phase + ") ==\n" : "") + t.log;
    }).join("\n") || "No output yet.";
    if (text !== lastLog) {
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      pre.textContent = text;
      lastLog = text;
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
  }

  // Live logs: one EventSource per choice of task. The server ends each stream after a time bound
  // (an event "timeout"); EventSource then reconnects by itself and Last-Event-ID carries the offsets
  // received, so nothing is sent twice. "end" means the job has ended: close, no reconnect.
  const texts = {};  // task index -> {name, text}
  let phases = {};
  let stream = null;
  let streamTask = null;
  let streamFailed = false;

  function renderLogs() {
    const keys = Object.keys(texts).sort(function (a, b) { return a - b; });
    const text = keys.map(function (k) {
      const head = keys.length > 1 ? "== " + texts[k].name + (phases[k] ? " (" + phases[k] + ")" : "") + " ==\n" : "";
      return head + texts[k].text;
    }).join("\n") || "No output yet.";
    const pre = $("job-logs");
    if (text !== lastLog) {
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      pre.textContent = text;
      lastLog = text;
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
  }

  let streamEnded = false;

  function followLogs() {
    if (streamFailed || !window.EventSource) return false;
    const task = $("log-task").value;
    if (stream && streamTask === task) return true;
    if (stream) stream.close();
    if (streamTask !== task) {
      for (const k of Object.keys(texts)) delete texts[k];
      streamEnded = false;
    }
    streamTask = task;
    if (streamEnded || document.hidden) return true;  // hidden: opened when the tab is shown
    // Resuming after the tab was hidden: ask only for what is not on the page yet.
    const since = Object.keys(texts).map(function (k) { return k + ":" + texts[k].text.length; }).join(",");
    const source = new EventSource(base + "logs/?follow=1" + (task !== "" ? "&task=" + encodeURIComponent(task) : "") +
      (since ? "&since=" + encodeURIComponent(since) : ""));
    stream = source;
    source.addEventListener("log", function (ev) {
      const d = JSON.parse(ev.data);
      const entry = texts[d.index] || (texts[d.index] = { name: d.task, text: "" });
      entry.text = d.reset ? d.text : entry.text.slice(0, d.offset) + d.text;
      renderLogs();
    });
    source.addEventListener("end", function () {
      source.close();
      streamEnded = true;
      renderLogs();
      $("logs-note").textContent = "The job has ended; this is its final output.";
    });
    source.addEventListener("open", function () {
      $("logs-note").textContent = "Live: new output appears as the job writes it.";
    });
    source.addEventListener("error", function () {
      // CLOSED after an error = the server refused the stream (not a reconnect): poll instead.
      if (source.readyState === EventSource.CLOSED && stream === source) {
        streamFailed = true;
        loadLogs();
      }
    });
    return true;
  }

  function showLogs() {
    if (!followLogs()) loadLogs();
  }

  // A stream holds a web worker while it is open: a tab nobody looks at gives it back.
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden" && stream && !streamEnded) {
      stream.close();
      stream = null;
    } else if (document.visibilityState === "visible" && !stream) {
      showLogs();
    }
  });

  async function refresh() {
    const [jobAnswer, eventsAnswer] = await Promise.all([P.api(base), P.api(base + "events/")]);
    if (!jobAnswer.ok) { say((jobAnswer.data && jobAnswer.data.message) || "The job cannot be loaded.", "error"); return true; }
    const job = jobAnswer.data;
    await loadTopology(job);
    renderJob(job);
    renderTasks(job);
    if (eventsAnswer.ok) renderEvents(eventsAnswer.data);
    phases = {};
    for (const t of job.tasks || []) phases[t.index] = t.phase;
    const done = TERMINAL.includes(job.status);
    if (followLogs()) {
      renderLogs();
    } else {
      await loadLogs();
      if (done) $("logs-note").textContent = "The job has ended; this is its final output.";
    }
    return !done;  // a finished job no longer changes: stop polling
  }

  const poller = P.poll(refresh, 2500);
  $("log-task").addEventListener("change", showLogs);

  const cancel = $("cancel-button");
  if (cancel) {
    // An inline confirmation instead of window.confirm(): keyboard and screen-reader friendly.
    cancel.addEventListener("click", function () {
      if (document.getElementById("cancel-confirm")) return;
      const yes = el("button", { type: "button", class: "button danger", id: "cancel-confirm", text: "Yes, cancel it" });
      const no = el("button", { type: "button", class: "button secondary", text: "Keep it" });
      const box = el("div", { class: "alert actions", role: "alertdialog", "aria-label": "Confirm cancel" },
        [el("span", { text: "Cancel job " + jobId + "? Its tasks are stopped." }), yes, no]);
      cancel.after(box);
      yes.focus();
      no.addEventListener("click", function () { box.remove(); cancel.focus(); });
      yes.addEventListener("click", async function () {
        yes.disabled = true;
        const answer = await P.api(base + "cancel/", { method: "POST" });
        box.remove();
        if (answer.ok) { cancelAsked = true; renderJob(answer.data); }
        else say((answer.data && answer.data.message) || "The job could not be cancelled.", "error");
        poller.now();
      });
    });
  }

  const clone = $("clone-button");
  if (clone) {
    clone.addEventListener("click", async function () {
      clone.disabled = true;
      const answer = await P.api(base + "clone/", { method: "POST" });
      if (answer.ok) { window.location.assign("/jobs/" + answer.data.id + "/"); return; }
      clone.disabled = false;
      say((answer.data && answer.data.message) || "The job could not be cloned.", "error");
    });
  }
})();
