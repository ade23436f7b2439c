// The settings page's one convenience: a button that fills the time zone field with this
// browser's own zone. Without JavaScript the button stays hidden and the field works alone. Its
// words are the page's (data-label, in the operator's language): this script only adds the zone.
"use strict";
(function () {
  var button = document.getElementById("browser-zone");
  var field = document.getElementById("time_zone");
  var zone = "";
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (e) {
    return;
  }
  if (!button || !field || !zone) {
    return;
  }
  button.textContent = (button.getAttribute("data-label") || button.textContent).replace("{zone}", zone);
  button.hidden = false;
  button.addEventListener("click", function () {
    field.value = zone;
    field.focus();
  });
})();
