// import.js moves an import job's progress bar (the page's #import-progress) by polling the
// job's progress answer (JSON: done, read, total, lines) every half second, and reloads the
// page when the import has ended or is no longer known, so the server renders its result.
// Without script the page refreshes itself instead (a <noscript> meta refresh). The status
// line's words are the page's (#import-status's data-template, in the operator's language):
// this script only fills in the numbers.
(function () {
  "use strict";
  var bar = document.getElementById("import-progress");
  if (!bar) {
    return;
  }
  var url = bar.getAttribute("data-progress");
  var status = document.getElementById("import-status");
  function tick() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" }, cache: "no-store" })
      .then(function (r) {
        if (r.status === 404) {
          location.reload();
          return null;
        }
        if (!r.ok) {
          throw new Error("progress answered " + r.status);
        }
        return r.json();
      })
      .then(function (p) {
        if (!p) {
          return;
        }
        bar.max = Math.max(p.total, 1);
        bar.value = p.read;
        var pct = p.total > 0 ? Math.floor((p.read * 100) / p.total) : 100;
        bar.textContent = pct + "%";
        if (status) {
          status.textContent = (status.getAttribute("data-template") || "")
            .replace("{read}", p.read).replace("{total}", p.total).replace("{pct}", pct).replace("{lines}", p.lines);
        }
        if (p.done) {
          location.reload();
        } else {
          setTimeout(tick, 500);
        }
      })
      .catch(function () {
        setTimeout(tick, 2000);
      });
  }
  setTimeout(tick, 250);
})();
