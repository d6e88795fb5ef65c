/* Job page, log tools: search within the shown log (matches highlighted, Previous/Next move between
 * them) and the download link following the chosen task. The log itself is written by job_detail.js
 * as plain text; when it changes the highlights are drawn again on the new text. */
(function () {
  "use strict";
  const pre = document.getElementById("job-logs");
  const box = document.getElementById("log-search");
  if (!pre || !box) return;
  const count = document.getElementById("log-search-count");
  const prev = document.getElementById("log-search-prev");
  const next = document.getElementById("log-search-next");
  const download = document.getElementById("log-download");
  const taskSelect = document.getElementById("log-task");
  let current = 0;
  let observer = null;

  function marks() { return pre.querySelectorAll("mark"); }

  function focusMatch(i) {
    const all = marks();
    all.forEach(function (m) { m.classList.remove("current"); });
    if (!all.length) return;
    current = (i + all.length) % all.length;
    const mark = all[current];
    mark.classList.add("current");
    // Scroll the log box only (not the page): the match lands in the middle of the box.
    pre.scrollTop = Math.max(0, mark.offsetTop - pre.offsetTop - pre.clientHeight / 2);
    count.textContent = (current + 1) + " of " + all.length + (all.length === 1 ? " match" : " matches");
  }

  function draw() {
    const needle = box.value;
    const text = pre.textContent;
    const keepScroll = pre.scrollTop;
    if (!needle) {
      if (marks().length) pre.textContent = text;
      count.textContent = "";
      prev.disabled = next.disabled = true;
      pre.scrollTop = keepScroll;
      settle();
      return;
    }
    const lower = text.toLowerCase();
    const want = needle.toLowerCase();
    const parts = [];
    let at = 0;
    let found = 0;
    for (let i = lower.indexOf(want); i >= 0; i = lower.indexOf(want, i + want.length)) {
      parts.push(document.createTextNode(text.slice(at, i)));
      const mark = document.createElement("mark");
      mark.textContent = text.slice(i, i + want.length);
      parts.push(mark);
      at = i + want.length;
      found++;
    }
    parts.push(document.createTextNode(text.slice(at)));
    pre.replaceChildren.apply(pre, parts);
    prev.disabled = next.disabled = found === 0;
    if (found) focusMatch(Math.min(current, found - 1));
    else { count.textContent = "No match"; pre.scrollTop = keepScroll; }
    settle();
  }

  // Our own changes to the log are not news: drop their records, or drawing would wake the observer
  // that draws again, forever.
  function settle() { if (observer) observer.takeRecords(); }

  // job_detail.js replaces the log's text as output arrives: highlight the new text again.
  observer = new MutationObserver(function () { if (box.value) draw(); });
  observer.observe(pre, { childList: true, characterData: true, subtree: true });

  box.addEventListener("input", function () { current = 0; draw(); });
  box.addEventListener("keydown", function (e) {
    if (e.key === "Enter") { e.preventDefault(); focusMatch(current + (e.shiftKey ? -1 : 1)); }
  });
  next.addEventListener("click", function () { focusMatch(current + 1); });
  prev.addEventListener("click", function () { focusMatch(current - 1); });

  if (download && taskSelect) {
    const base = download.getAttribute("href");
    taskSelect.addEventListener("change", function () {
      download.setAttribute("href", base + (taskSelect.value !== "" ? "?task=" + encodeURIComponent(taskSelect.value) : ""));
    });
  }
})();
