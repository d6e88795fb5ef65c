/* Submit form: builds the JSON body of POST /api/v1/jobs/, shows every field error of the API's one
 * validation path (jobs.validation) at once next to its field, checks without submitting through
 * POST /api/v1/jobs/validate/, and converts between the form and YAML through /portal/yaml/dump and
 * /portal/yaml/parse; an imported YAML is checked as it was written, before it fills the form. */
(function () {
  "use strict";
  const P = window.Portal;
  const el = P.el;
  const form = document.getElementById("submit-form");
  const message = document.getElementById("form-message");
  const $ = function (id) { return document.getElementById(id); };
  const range = $("f-gpu-milli-range");
  const milli = $("f-gpu-milli");
  // Fields the form has no input for (args, gpu_models, ... from an imported YAML): sent as they are.
  let extras = {};

  const FORM_FIELDS = ["name", "team", "image", "command", "gpu_request", "gpus", "gpu_milli", "gpu_memory_mib", "replicas",
    "priority", "max_runtime_seconds", "env", "cpu_milli", "memory_mib", "max_retries", "slowdown_tolerance",
    "sim_duration_seconds", "preemptible", "min_runtime_seconds", "allow_sharing", "preemption_grace_seconds"];

  function mode() {
    return form.querySelector('input[name="gpu_request"]:checked').value;
  }

  function showMode() {
    $("whole-fields").hidden = mode() !== "whole";
    $("fraction-fields").hidden = mode() !== "share";
  }

  function shareText() {
    const v = Number(milli.value);
    $("gpu-share-text").textContent = !Number.isInteger(v) || v < 1 || v > 999
      ? "Give a share between 1 and 999 milli-GPU (1000 milli-GPU = one whole GPU)."
      : v + " milli-GPU = " + (Math.round(v / 10 * 10) / 10) + "% of one GPU's compute.";
  }

  range.addEventListener("input", function () { milli.value = range.value; shareText(); });
  milli.addEventListener("input", function () {
    const v = parseInt(milli.value, 10);
    if (!isNaN(v)) range.value = String(Math.min(950, Math.max(50, Math.round(v / 50) * 50)));
    shareText();
  });
  form.querySelectorAll('input[name="gpu_request"]').forEach(function (r) { r.addEventListener("change", showMode); });

  function intOrNull(input) {
    const text = input.value.trim();
    if (text === "") return null;
    const n = Number(text);
    return Number.isFinite(n) ? n : text;  // not a number: let the API say so next to the field
  }

  function parseEnv(text) {
    const env = {};
    const bad = [];
    text.split("\n").forEach(function (line, i) {
      const trimmed = line.trim();
      if (!trimmed || trimmed.startsWith("#")) return;
      const at = trimmed.indexOf("=");
      if (at <= 0) { bad.push("Line " + (i + 1) + " is not NAME=value."); return; }
      env[trimmed.slice(0, at).trim()] = trimmed.slice(at + 1);
    });
    return { env: env, bad: bad };
  }

  /* The spec of the form, in the API's field names. */
  function collect() {
    const spec = Object.assign({}, extras);
    spec.name = $("f-name").value.trim();
    // Slug and name:tag rather than ids: the API takes both, and they read well in the YAML view.
    const team = $("f-team").selectedOptions[0];
    if (team) spec.team = team.dataset.slug || parseInt(team.value, 10);
    const image = $("f-image").selectedOptions[0];
    if (image) spec.image = image.dataset.reference || parseInt(image.value, 10);
    spec.command = $("f-command").value;
    const m = mode();
    delete spec.gpus; delete spec.gpu_milli; delete spec.gpu_memory_mib;
    spec.gpu_request = m;  // said explicitly, so "whole GPUs: 0" is an error, not a CPU-only job
    if (m === "whole") spec.gpus = intOrNull($("f-gpus"));
    if (m === "share") {
      spec.gpu_milli = intOrNull(milli);
      spec.gpu_memory_mib = intOrNull($("f-gpu-memory")) || 0;
    }
    spec.replicas = intOrNull($("f-replicas"));
    spec.priority = intOrNull($("f-priority"));
    spec.max_runtime_seconds = intOrNull($("f-max-runtime"));
    spec.env = parseEnv($("f-env").value).env;
    spec.cpu_milli = intOrNull($("f-cpu"));
    spec.memory_mib = intOrNull($("f-memory"));
    spec.max_retries = intOrNull($("f-retries"));
    spec.slowdown_tolerance = intOrNull($("f-slowdown"));
    spec.sim_duration_seconds = intOrNull($("f-sim-duration"));
    spec.min_runtime_seconds = intOrNull($("f-min-runtime"));
    spec.preemption_grace_seconds = intOrNull($("f-grace"));
    spec.preemptible = $("f-preemptible").checked;
    spec.allow_sharing = $("f-allow-sharing").checked;
    for (const key of Object.keys(spec)) if (spec[key] === null) delete spec[key];
    return spec;
  }

  function selectOption(select, value, attr) {
    for (const option of select.options) {
      if (option.value === String(value) || (attr && option.dataset[attr] === String(value))) { select.value = option.value; return true; }
    }
    return false;
  }

  /* Put a spec (from YAML or an existing job) into the form; what the form cannot show is kept. */
  function fill(spec) {
    extras = {};
    const problems = [];
    for (const key of Object.keys(spec)) if (!FORM_FIELDS.includes(key)) extras[key] = spec[key];
    const set = function (id, value) { $(id).value = value === null || value === undefined ? "" : String(value); };
    set("f-name", spec.name);
    if (spec.team !== undefined && !selectOption($("f-team"), spec.team, "slug")) problems.push("team " + spec.team + " is not one you can submit to");
    if (spec.image !== undefined && !selectOption($("f-image"), spec.image, "reference")) problems.push("image " + spec.image + " is not in the catalog");
    // Shell-quoted words (what the API's shlex.split reads back); anything else as it was written, so
    // the check beside the field says what is wrong with it.
    const command = spec.command;
    set("f-command", Array.isArray(command) && command.every(function (w) { return typeof w === "string"; })
      ? P.shellJoin(command) : command === undefined || typeof command === "string" ? command : JSON.stringify(command));
    let m = ["cpu", "share", "whole"].includes(spec.gpu_request) ? spec.gpu_request
      : spec.gpus !== undefined && spec.gpus !== 0 ? "whole"
      : spec.gpu_milli !== undefined && spec.gpu_milli !== null ? "share" : "cpu";
    if (m === "whole") set("f-gpus", spec.gpus);
    if (m === "share") { set("f-gpu-milli", spec.gpu_milli); set("f-gpu-memory", spec.gpu_memory_mib || 0); milli.dispatchEvent(new Event("input")); }
    form.querySelector('input[name="gpu_request"][value="' + m + '"]').checked = true;
    showMode();
    set("f-replicas", spec.replicas === undefined ? 1 : spec.replicas);
    set("f-priority", spec.priority === undefined ? 0 : spec.priority);
    set("f-max-runtime", spec.max_runtime_seconds);
    const env = spec.env && typeof spec.env === "object" ? spec.env : {};
    set("f-env", Object.keys(env).map(function (k) { return k + "=" + env[k]; }).join("\n"));
    set("f-cpu", spec.cpu_milli === undefined ? 1000 : spec.cpu_milli);
    set("f-memory", spec.memory_mib === undefined ? 2048 : spec.memory_mib);
    set("f-retries", spec.max_retries === undefined ? 0 : spec.max_retries);
    set("f-slowdown", spec.slowdown_tolerance === undefined ? 1.5 : spec.slowdown_tolerance);
    set("f-sim-duration", spec.sim_duration_seconds);
    set("f-min-runtime", spec.min_runtime_seconds === undefined ? 0 : spec.min_runtime_seconds);
    set("f-grace", spec.preemption_grace_seconds);
    $("f-preemptible").checked = spec.preemptible !== false;
    $("f-allow-sharing").checked = spec.allow_sharing === true;
    return problems;
  }

  const LABELS = { non_field_errors: "", args: "Arguments", gpu_models: "GPU models", team: "Team" };

  /* Every field error at once: next to its field where the form has one, the rest (unknown fields,
   * fields only the YAML sets) listed in the summary on top. ``extra`` adds the form's own findings. */
  function showErrors(answer, extra, summary) {
    P.clearErrors(form, message);
    const data = answer.data || {};
    const fields = Object.assign({}, (data.extra && data.extra.fields) || {});
    for (const key of Object.keys(extra || {})) fields[key] = [].concat(extra[key], fields[key] || []);
    const loose = [];
    let first = null;
    for (const key of Object.keys(fields)) {
      const text = [].concat(fields[key]).map(function (m) { return typeof m === "string" ? m : JSON.stringify(m); }).join(" ");
      const slot = $("err-" + key);
      const input = form.querySelector('[name="' + key + '"]');
      if (slot && input) {
        slot.textContent = text;
        input.setAttribute("aria-invalid", "true");
        if (input.closest("details")) input.closest("details").open = true;
        first = first || input;
      } else {
        const label = LABELS[key] !== undefined ? LABELS[key] : key;
        loose.push(label ? label + ": " + text : text);
      }
    }
    const count = Object.keys(fields).length;
    const head = summary || (count ? count + " field" + (count === 1 ? " needs" : "s need") + " a fix." : (data.message || "The job could not be submitted."));
    message.className = "alert error";
    message.replaceChildren(el("p", { text: head }));
    if (loose.length) message.appendChild(el("ul", {}, loose.map(function (t) { return el("li", { text: t }); })));
    message.hidden = false;
    (first || message).focus && (first || message).focus();
  }

  function envErrors() {
    const env = parseEnv($("f-env").value);
    return env.bad.length ? { env: env.bad } : {};
  }

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    P.clearErrors(form, message);
    const local = envErrors();
    const button = $("submit-button");
    button.disabled = true;
    button.textContent = "Submitting…";
    // With a problem the form found itself, only check (nothing may be created), so the API's
    // errors show beside it.
    const answer = await P.api(Object.keys(local).length ? "/api/v1/jobs/validate/" : "/api/v1/jobs/", { method: "POST", body: collect() });
    button.disabled = false;
    button.textContent = "Submit job";
    if (answer.ok && !Object.keys(local).length) {
      window.location.assign("/jobs/" + answer.data.id + "/");
      return;
    }
    showErrors(answer.ok ? { data: {} } : answer, local);
  });

  $("check-button").addEventListener("click", async function () {
    P.clearErrors(form, message);
    const local = envErrors();
    const answer = await P.api("/api/v1/jobs/validate/", { method: "POST", body: collect() });
    if (answer.ok && !Object.keys(local).length) {
      message.className = "alert ok";
      message.replaceChildren(el("p", { text: "Every field is valid; nothing was submitted." }));
      message.hidden = false;
      return;
    }
    showErrors(answer.ok ? { data: {} } : answer, local);
  });

  function download(text, name) {
    const url = URL.createObjectURL(new Blob([text], { type: "text/yaml" }));
    const link = el("a", { href: url, download: name, hidden: true });
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  function fileName() {
    const name = ($("f-name").value.trim() || "job").replace(/[^A-Za-z0-9_.-]+/g, "-");
    return name + ".yaml";
  }

  $("download-yaml").addEventListener("click", async function () {
    const spec = collect();
    delete spec.gpu_request;
    const answer = await P.api("/portal/yaml/dump", { method: "POST", body: { spec: spec } });
    if (answer.ok) download(answer.data.yaml, fileName());
  });
  $("yaml-download").addEventListener("click", function () { download($("yaml-text").value, fileName()); });

  // Tabs: Form <-> YAML, keyboard operable (arrow keys move between tabs).
  const tabs = [$("tab-form"), $("tab-yaml")];
  async function select(tab) {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (tab === tabs[1]) {
      $("err-yaml").textContent = "";
      const spec = collect();
      delete spec.gpu_request;  // the YAML says it through gpus / gpu_milli, as the CLI's files do
      const before = $("yaml-text").value;
      const answer = await P.api("/portal/yaml/dump", { method: "POST", body: { spec: spec } });
      // Typed or pasted while the form was being converted: keep what the person wrote.
      if (answer.ok && $("yaml-text").value === before) $("yaml-text").value = answer.data.yaml;
    }
  }
  tabs.forEach(function (tab, i) {
    tab.addEventListener("click", function () { select(tab); });
    tab.addEventListener("keydown", function (e) {
      if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
        const next = tabs[(i + (e.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
        next.focus();
        select(next);
      }
    });
  });

  $("yaml-file").addEventListener("change", function () {
    const file = this.files && this.files[0];
    if (!file) return;
    file.text().then(function (text) { $("yaml-text").value = text; });
  });

  $("yaml-import").addEventListener("click", async function () {
    $("err-yaml").textContent = "";
    $("yaml-text").removeAttribute("aria-invalid");
    const answer = await P.api("/portal/yaml/parse", { method: "POST", body: { yaml: $("yaml-text").value } });
    if (!answer.ok) {
      $("err-yaml").textContent = (answer.data && answer.data.message) || "The YAML cannot be read.";
      $("yaml-text").setAttribute("aria-invalid", "true");
      return;
    }
    const spec = answer.data.spec;
    // Checked as written (not as the form would re-read it: "command: 42" must not become "42").
    const check = await P.api("/api/v1/jobs/validate/", { method: "POST", body: spec });
    const problems = fill(spec);
    await select(tabs[0]);
    P.clearErrors(form, message);
    const extra = {};
    if (problems.length) extra.non_field_errors = problems;
    if (!check.ok || problems.length) {
      showErrors(check.ok ? { data: {} } : check, extra, "Imported, but the YAML has problems: fix them here, then submit.");
      return;
    }
    tabs[0].focus();
  });

  // Start from ?image=<id> (image catalog) or ?from=<job id> ("Edit a copy").
  (async function init() {
    const params = new URLSearchParams(location.search);
    if (params.get("image")) selectOption($("f-image"), params.get("image"), "reference");
    if (params.get("from")) {
      const answer = await P.api("/api/v1/jobs/" + encodeURIComponent(params.get("from")) + "/");
      if (answer.ok) {
        const job = answer.data;
        const spec = {};
        for (const key of FORM_FIELDS) if (job[key] !== undefined) spec[key] = job[key];
        spec.gpu_request = job.gpus ? "whole" : job.gpu_milli ? "share" : "cpu";
        if (!job.gpus) delete spec.gpus;
        if (!job.gpu_milli) delete spec.gpu_milli;
        for (const key of ["args", "gpu_models"]) if (job[key] && job[key].length) spec[key] = job[key];
        spec.name = job.name ? job.name + "-copy" : "";
        fill(spec);
      }
    }
    showMode();
    shareText();
  })();
})();
