/* Submit form: builds the JSON body of POST /api/v1/jobs/, shows the API's field errors next to the
 * fields, and converts between the form and YAML through /portal/yaml/dump and /portal/yaml/parse. */
(function () {
  "use strict";
  const P = window.Portal;
  const form = document.getElementById("submit-form");
  const message = document.getElementById("form-message");
  const $ = function (id) { return document.getElementById(id); };
  const range = $("f-gpu-milli-range");
  const milli = $("f-gpu-milli");
  // Fields the form has no input for (args, gpu_models, ... from an imported YAML): sent as they are.
  let extras = {};

  const FORM_FIELDS = ["name", "team", "image", "command", "gpus", "gpu_milli", "gpu_memory_mib", "replicas",
    "priority", "max_runtime_seconds", "env", "cpu_milli", "memory_mib", "max_retries", "slowdown_tolerance",
    "sim_duration_seconds", "preemptible", "min_runtime_seconds", "allow_sharing", "preemption_grace_seconds"];

  function mode() {
    return form.querySelector('input[name="gpu_mode"]:checked').value;
  }

  function showMode() {
    $("whole-fields").hidden = mode() !== "whole";
    $("fraction-fields").hidden = mode() !== "fraction";
  }

  function shareText() {
    const v = parseInt(milli.value, 10);
    $("gpu-share-text").textContent = isNaN(v) ? "Give a share between 1 and 999 milli-GPU."
      : v + " milli-GPU = " + Math.round(v / 10) + "% of one GPU's compute.";
  }

  range.addEventListener("input", function () { milli.value = range.value; shareText(); });
  milli.addEventListener("input", function () {
    const v = parseInt(milli.value, 10);
    if (!isNaN(v)) range.value = String(Math.min(950, Math.max(50, Math.round(v / 50) * 50)));
    shareText();
  });
  form.querySelectorAll('input[name="gpu_mode"]').forEach(function (r) { r.addEventListener("change", showMode); });

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
    if (m === "whole") spec.gpus = intOrNull($("f-gpus"));
    if (m === "fraction") {
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

  function shellQuote(word) {
    return /^[A-Za-z0-9_\-.,:/=+@%]+$/.test(word) ? word : "'" + String(word).replace(/'/g, "'\"'\"'") + "'";
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
    set("f-command", Array.isArray(spec.command) ? spec.command.map(shellQuote).join(" ") : spec.command);
    let m = "none";
    if (spec.gpus) { m = "whole"; set("f-gpus", spec.gpus); }
    else if (spec.gpu_milli) { m = "fraction"; set("f-gpu-milli", spec.gpu_milli); set("f-gpu-memory", spec.gpu_memory_mib || 0); milli.dispatchEvent(new Event("input")); }
    form.querySelector('input[name="gpu_mode"][value="' + m + '"]').checked = true;
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

  function showErrors(answer) {
    P.clearErrors(form, message);
    const data = answer.data || {};
    const fields = (data.extra && data.extra.fields) || {};
    const loose = [];
    let first = null;
    for (const key of Object.keys(fields)) {
      const text = [].concat(fields[key]).map(function (m) { return typeof m === "string" ? m : JSON.stringify(m); }).join(" ");
      const slot = $("err-" + key);
      const input = form.querySelector('[name="' + key + '"]');
      if (slot && input) {
        slot.textContent = text;
        input.setAttribute("aria-invalid", "true");
        first = first || input;
      } else {
        loose.push((LABELS[key] !== undefined ? LABELS[key] : key) ? (LABELS[key] || key) + ": " + text : text);
      }
    }
    message.textContent = (data.message || "The job could not be submitted.") + (loose.length ? " " + loose.join(" ") : "");
    message.hidden = false;
    (first || message).focus && (first || message).focus();
  }

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    P.clearErrors(form, message);
    const env = parseEnv($("f-env").value);
    if (env.bad.length) {
      $("err-env").textContent = env.bad.join(" ");
      $("f-env").setAttribute("aria-invalid", "true");
      $("f-env").focus();
      return;
    }
    const button = $("submit-button");
    button.disabled = true;
    button.textContent = "Submitting…";
    const answer = await P.api("/api/v1/jobs/", { method: "POST", body: collect() });
    if (answer.ok) {
      window.location.assign("/jobs/" + answer.data.id + "/");
      return;
    }
    button.disabled = false;
    button.textContent = "Submit job";
    showErrors(answer);
  });

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
      const answer = await P.api("/portal/yaml/dump", { method: "POST", body: { spec: collect() } });
      if (answer.ok) $("yaml-text").value = answer.data.yaml;
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
    const problems = fill(answer.data.spec);
    await select(tabs[0]);
    P.clearErrors(form, message);
    if (problems.length) { message.textContent = "Imported, but " + problems.join("; ") + "."; message.hidden = false; }
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
        for (const key of ["args", "gpu_models"]) if (job[key] && job[key].length) spec[key] = job[key];
        spec.name = job.name ? job.name + "-copy" : "";
        fill(spec);
      }
    }
    showMode();
    shareText();
  })();
})();
