// The product page's countdown to the start of the sale: it counts the seconds the server
// rendered (by the gate's clock) down and, at zero, shows the order form without a reload.
// Without this script the page says to reload, which renders the form once the sale is open.
(function () {
  "use strict";
  var box = document.getElementById("countdown");
  var out = document.getElementById("countdown-clock");
  if (!box || !out) { return; }
  var end = Date.now() + Number(box.getAttribute("data-remaining")) * 1000;
  // The day's suffix in the page's language ("d", "天"), from the message catalogues.
  var day = box.getAttribute("data-day-suffix") || "d";
  var hint = document.getElementById("countdown-hint");
  if (hint) { hint.hidden = true; }
  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function show(secs) {
    var d = Math.floor(secs / 86400), h = Math.floor(secs / 3600) % 24, m = Math.floor(secs / 60) % 60, s = secs % 60;
    out.textContent = (d > 0 ? d + day + " " : "") + h + ":" + pad(m) + ":" + pad(s);
  }
  function tick() {
    var secs = Math.max(0, Math.ceil((end - Date.now()) / 1000));
    show(secs);
    if (secs === 0) {
      box.hidden = true;
      var form = document.getElementById("checkout");
      if (form) { form.hidden = false; }
      return;
    }
    setTimeout(tick, Math.min(1000, end - Date.now() - (secs - 1) * 1000));
  }
  tick();
})();
