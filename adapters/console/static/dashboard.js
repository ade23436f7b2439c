// The live dashboard: follows /console/dashboard/events (one JSON snapshot every few seconds)
// and updates the server-rendered page in place. The charts are the page's own SVG polylines:
// the server sends each series' points already scaled, so this script only sets attributes.
// Served as a file (the console's CSP allows no inline script); no library.
"use strict";
(function () {
  var root = document.getElementById("dashboard");
  if (!root || !window.EventSource) { return; }
  var live = document.getElementById("dash-live");
  var ids = root.getAttribute("data-products");
  // The page's texts in its language (data-text-*): the script holds none of its own.
  function say(name) { return root.getAttribute("data-text-" + name) || ""; }

  function text(el, value) {
    if (el && el.textContent !== String(value)) { el.textContent = String(value); }
  }

  function product(p) {
    var sec = root.querySelector('section[data-id="' + p.id + '"]');
    if (!sec) { return; }
    text(sec.querySelector('[data-field="stock"]'), p.gate_ok ? p.stock : say("no-gate"));
    text(sec.querySelector('[data-field="pending"]'), p.pending);
    text(sec.querySelector('[data-field="paid"]'), p.paid);
    text(sec.querySelector('[data-field="success"]'), p.success);
    [["orders", p.orders], ["sold_out", p.sold_out]].forEach(function (s) {
      var fig = sec.querySelector('figure[data-series="' + s[0] + '"]');
      if (!fig) { return; }
      fig.querySelector("polyline").setAttribute("points", s[1].points);
      text(fig.querySelector('[data-field="' + s[0] + '-last"]'), s[1].last);
      text(fig.querySelector('[data-label="max"]'), say("top") + " " + s[1].max);
    });
  }

  function show(d) {
    var err = document.getElementById("dash-error");
    text(err, d.error || "");
    err.hidden = !d.error;
    text(document.getElementById("dash-at"), d.at);
    if (d.error) { return; }
    // A product came on sale or left it: the page's sections no longer match; load it again.
    var now = d.products.map(function (p) { return p.id; }).join(",");
    if (now !== ids) { window.location.reload(); return; }
    d.products.forEach(product);
    text(document.getElementById("dash-outbox"), d.outbox);
    text(document.getElementById("dash-webhook"), d.webhook);
    text(document.getElementById("dash-mail"), d.mail);
    text(document.getElementById("dash-overdue"), d.overdue);
    (d.queues || []).forEach(function (q) {
      text(root.querySelector('[data-queue="' + q.name + '"]'), q.messages);
    });
    text(document.getElementById("dash-alerts-open"), d.alerts_open);
    text(document.getElementById("dash-alert-kinds"),
      (d.alerts || []).map(function (a) { return " · " + a.kind + ": " + a.open; }).join(""));
    (d.bot || []).forEach(function (b) {
      text(root.querySelector('[data-bot="' + b.reason + '"]'), b.count);
    });
    (d.ready || []).forEach(function (r) {
      var li = root.querySelector('#dash-ready [data-check="' + r.name + '"]');
      if (!li) { return; }
      li.className = "state-" + r.state;
      text(li.querySelector("strong"), r.state);
    });
  }

  var source = new EventSource(root.getAttribute("data-events"));
  source.addEventListener("snapshot", function (e) {
    text(live, say("live"));
    show(JSON.parse(e.data));
  });
  source.onerror = function () {
    // EventSource reconnects on its own after a dropped stream; it gives up (CLOSED) when the
    // server refuses, e.g. too many open dashboards or an expired session.
    text(live, source.readyState === EventSource.CLOSED ?
      say("stopped") : say("reconnecting"));
  };
}());
