/* API tokens page: a confirmation before a token is revoked (a script using it stops working at
 * once), focus on the new token, and copying it to the clipboard. The forms work without this. */
(function () {
  "use strict";
  document.querySelectorAll("form.revoke-form").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      if (!window.confirm("Revoke the token “" + form.dataset.name + "”? Anything using it stops working at once.")) e.preventDefault();
    });
  });
  const value = document.getElementById("new-token-value");
  if (value) { value.focus(); value.select(); }
  const copy = document.getElementById("copy-token");
  if (copy && value) {
    copy.addEventListener("click", async function () {
      const note = document.getElementById("copy-note");
      try {
        await navigator.clipboard.writeText(value.value);
        note.textContent = "Copied.";
      } catch (err) {
        value.select();
        note.textContent = "Select the text and copy it yourself (the browser refused).";
      }
    });
  }
})();
