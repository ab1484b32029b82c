// Deep links: /runs/<id>/#seq-N jumps to the page of the timeline that holds event N when it is not shown.
(function () {
  "use strict";
  var m = /^#seq-(\d+)$/.exec(window.location.hash);
  if (!m || document.getElementById("seq-" + m[1])) return;
  var params = new URLSearchParams(window.location.search);
  if (params.get("at") === m[1]) return;
  params.set("at", m[1]);
  window.location.replace(window.location.pathname + "?" + params.toString() + window.location.hash);
})();
