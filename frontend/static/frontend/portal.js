/* Shared helpers of the portal's pages: REST calls with the session cookie and CSRF token, polling,
 * DOM building without innerHTML (user data is always text), status badges, colours. */
(function () {
  "use strict";

  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  /* fetch() a JSON endpoint. Resolves to {ok, status, data}; never rejects on HTTP errors, so callers
   * show the API's {message, code, extra} to the user. Network failures become status 0. */
  async function api(path, options) {
    const opts = options || {};
    const headers = { Accept: "application/json" };
    const init = { method: opts.method || "GET", headers: headers, credentials: "same-origin" };
    if (init.method !== "GET") headers["X-CSRFToken"] = csrfToken();
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      return { ok: false, status: 0, data: { message: "The server cannot be reached. Retrying…", code: "network", extra: {} } };
    }
    if (response.status === 401) {
      // The session ended (logged out in another tab): back to the log-in page.
      window.location.assign("/login/?next=" + encodeURIComponent(location.pathname + location.search));
    }
    let data = null;
    if (response.status !== 204) {
      try { data = await response.json(); } catch (err) { data = { message: "Unexpected answer from the server.", code: "bad_response", extra: {} }; }
    }
    return { ok: response.ok, status: response.status, data: data };
  }

  /* Run fn now and then every ms milliseconds, one call at a time, paused while the tab is hidden.
   * fn may return false to stop polling (e.g. a finished job). now() runs it at once (after the call
   * in flight, if any) and restarts the interval. */
  function poll(fn, ms) {
    let timer = null;
    let running = false;
    let again = false;
    let stopped = false;
    async function tick() {
      if (timer) { clearTimeout(timer); timer = null; }
      if (stopped) return;
      if (running) { again = true; return; }
      if (document.hidden) { timer = setTimeout(tick, ms); return; }
      running = true;
      let keep = true;
      try { keep = (await fn()) !== false; } catch (err) { keep = true; }
      running = false;
      if (!keep) { stopped = true; return; }
      if (again) { again = false; tick(); return; }
      if (!stopped) timer = setTimeout(tick, ms);
    }
    tick();
    return { stop: function () { stopped = true; if (timer) clearTimeout(timer); }, now: tick };
  }

  /* el("a", {href: "/x", class: "y"}, ["text", child]) — text children become text nodes. */
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const key of Object.keys(attrs)) {
        const value = attrs[key];
        if (value === null || value === undefined || value === false) continue;
        if (key === "text") node.textContent = value;
        else if (key === "style" && typeof value === "object") Object.assign(node.style, value);
        else node.setAttribute(key, value === true ? "" : String(value));
      }
    }
    for (const child of [].concat(children || [])) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
    }
    return node;
  }

  function badge(status) {
    return el("span", { class: "badge badge-" + String(status || "").toLowerCase(), text: status });
  }

  function fmtTime(iso) {
    if (!iso) return "–";
    const d = new Date(iso);
    if (isNaN(d.getTime())) return iso;
    return d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function timeEl(iso) {
    return iso ? el("time", { datetime: iso, text: fmtTime(iso) }) : document.createTextNode("–");
  }

  /* 250 -> "0.25", 2000 -> "2" */
  function gpus(milli) {
    return String(Math.round((milli || 0) / 10) / 100);
  }

  /* What a job asks for per replica, in words. */
  function asks(job) {
    if (job.gpus) return job.gpus + (job.gpus === 1 ? " GPU" : " GPUs");
    if (job.gpu_milli) {
      const mem = job.gpu_memory_mib ? ", " + (Math.round(job.gpu_memory_mib / 102.4) / 10) + " GiB" : "";
      return gpus(job.gpu_milli) + " GPU" + mem;
    }
    return "CPU only";
  }

  // A palette with enough contrast against the light "free" colour and white separators.
  const PALETTE = ["#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#be185d",
    "#4d7c0f", "#4338ca", "#9a3412", "#0f766e"];
  function hash(text) {
    let h = 0;
    for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) >>> 0;
    return h;
  }
  function colorFor(key) {
    return PALETTE[hash(String(key)) % PALETTE.length];
  }

  /* Colours for the keys shown at once ("job 12", "team speech"): never one colour for two keys.
   * Up to HUES keys get evenly spaced hues (two lightness steps, alternating, so neighbours in the
   * list differ most); past that the same colours come back with a pattern (stripes, then dots, then
   * cross-hatch), so 40 jobs are 40 distinct looks. Returns key -> {color, pattern, image}; image is a
   * CSS background-image ("" when plain) set through the CSSOM, which the CSP allows. */
  const HUES = 16;
  const PATTERNS = ["", "stripes", "dots", "hatch", "bars"];
  function patternImage(pattern) {
    const ink = "rgba(255,255,255,0.55)";
    if (pattern === "stripes") return "repeating-linear-gradient(45deg, " + ink + " 0 2px, transparent 2px 6px)";
    if (pattern === "dots") return "radial-gradient(" + ink + " 1.2px, transparent 1.6px)";
    if (pattern === "hatch") return "repeating-linear-gradient(45deg, " + ink + " 0 1.5px, transparent 1.5px 5px), repeating-linear-gradient(-45deg, " + ink + " 0 1.5px, transparent 1.5px 5px)";
    if (pattern === "bars") return "repeating-linear-gradient(90deg, " + ink + " 0 2px, transparent 2px 5px)";
    return "";
  }
  function palette(keys) {
    const out = new Map();
    keys.forEach(function (key, i) {
      const slot = i % HUES;
      // Spread consecutive slots around the wheel (stride 7 of 16 is coprime: every hue once).
      const hue = Math.round(((slot * 7) % HUES) * (360 / HUES) + 8);
      const light = slot % 2 ? 30 : 42;
      const pattern = PATTERNS[Math.floor(i / HUES) % PATTERNS.length];
      out.set(key, { color: "hsl(" + hue + " 70% " + light + "%)", pattern: pattern, image: patternImage(pattern) });
    });
    return out;
  }

  /* "job 2" before "job 10", jobs before teams: the legend's order. */
  function byNumber(a, b) {
    return a.localeCompare(b, undefined, { numeric: true });
  }

  /* One word as a POSIX shell (and the API's shlex.split) reads it back: bare when it is plain,
   * 'single-quoted' when it has no single quote, else "double-quoted" with only \ and " escaped
   * (shlex.split's rule), so python -c 'import os; print("hi")' reads as it was typed. */
  function shellQuote(word) {
    const text = String(word);
    if (/^[A-Za-z0-9_\-.,:/=+@%^]+$/.test(text)) return text;
    if (!text.includes("'")) return "'" + text + "'";
    return '"' + text.replace(/(["\\])/g, "\\$1") + '"';
  }

  function shellJoin(words) {
    return [].concat(words || []).map(shellQuote).join(" ");
  }

  /* Show an API error: fields next to their inputs (elements with id err-<field>), the rest on top. */
  function clearErrors(form, summary) {
    form.querySelectorAll(".field-error").forEach(function (p) { p.textContent = ""; });
    form.querySelectorAll('[aria-invalid="true"]').forEach(function (i) { i.removeAttribute("aria-invalid"); });
    if (summary) { summary.hidden = true; summary.textContent = ""; }
  }

  window.Portal = { api: api, poll: poll, el: el, badge: badge, fmtTime: fmtTime, timeEl: timeEl, gpus: gpus,
    asks: asks, colorFor: colorFor, clearErrors: clearErrors, csrfToken: csrfToken, shellJoin: shellJoin, palette: palette, byNumber: byNumber };
})();
