// The order page's copy buttons: shown only when the clipboard API is there, each copies its
// code and says so for a moment.
(function () {
  "use strict";
  if (!navigator.clipboard) { return; }
  var buttons = document.querySelectorAll("button.copy");
  Array.prototype.forEach.call(buttons, function (b) {
    var label = b.textContent;
    b.hidden = false;
    b.addEventListener("click", function () {
      var code = document.getElementById(b.getAttribute("data-copy"));
      if (!code) { return; }
      navigator.clipboard.writeText(code.textContent).then(function () {
        b.textContent = b.getAttribute("data-done");
        setTimeout(function () { b.textContent = label; }, 1500);
      });
    });
  });
})();
