// The QR page follows its order: it asks for the order's status every two seconds (with the
// last ETag, so an unchanged status costs a 304) and moves on to the order page once the
// order is no longer PENDING. It also counts the time left down. Without this script the
// page's meta refresh reloads it, and the server moves on the same way.
(function () {
  "use strict";
  var box = document.getElementById("follow");
  if (!box) { return; }
  var url = box.getAttribute("data-status"), next = box.getAttribute("data-next"), etag = "";
  function poll() {
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch(url, { headers: headers, credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 304) { return null; }
      etag = r.headers.get("ETag") || "";
      return r.ok ? r.json() : null;
    }).then(function (body) {
      if (body && body.status && body.status !== "PENDING") { window.location.assign(next); return; }
      setTimeout(poll, 2000);
    }, function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 2000);
  var left = document.querySelector(".time-left");
  if (left) {
    var end = Date.now() + Number(left.getAttribute("data-seconds")) * 1000;
    var pad = function (n) { return n < 10 ? "0" + n : String(n); };
    setInterval(function () {
      var s = Math.max(0, Math.ceil((end - Date.now()) / 1000));
      left.textContent = Math.floor(s / 3600) + ":" + pad(Math.floor(s / 60) % 60) + ":" + pad(s % 60);
    }, 1000);
  }
})();
