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

// Confirmation for decisions that stop work (Reject, Cancel run): a button with data-confirm asks
// first. Runs in the capture phase, before htmx sees the submit, so "No" sends nothing at all.
document.addEventListener(
  "submit",
  function (event) {
    var button = event.submitter;
    var question = button && button.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  },
  true
);

// A decision taken in an inbox row is said outside the table (the live inbox may refresh the row away).
document.body.addEventListener("inbox:decided", function (event) {
  var status = document.getElementById("inbox-status");
  if (status && event.detail && event.detail.text) status.textContent = event.detail.text;
  var count = document.querySelector(".nav-count");
  if (count && event.detail && typeof event.detail.pending === "number") {
    if (event.detail.pending > 0) count.firstChild.textContent = String(event.detail.pending);
    else count.remove();
  }
});

// "Copy link" on an opened timeline event: its permalink, absolute, to the clipboard.
document.addEventListener("click", function (event) {
  var button = event.target.closest && event.target.closest("button.copy-link");
  if (!button) return;
  var url = new URL(button.getAttribute("data-copy"), window.location.href).href;
  var done = function () {
    button.textContent = "Link copied";
  };
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(url).then(done, function () {
      window.prompt("Copy this link", url);
    });
  } else {
    window.prompt("Copy this link", url);
  }
});

// Light timeline rows: opening one loads its JSON, state and actions (runs:event_detail) once.
document.addEventListener(
  "toggle",
  function (event) {
    var details = event.target;
    if (!details.open || details.hasAttribute("data-loaded") || !details.parentElement) return;
    var li = details.parentElement;
    var list = li.closest("#timeline-list");
    if (!li.classList.contains("ev") || !list || !window.htmx) return;
    details.setAttribute("data-loaded", "");
    var url = list.getAttribute("data-detail-base") + li.getAttribute("data-seq") + "/detail/";
    if (li.hasAttribute("data-upto")) url += "?upto=" + li.getAttribute("data-upto");
    window.htmx.ajax("GET", url, { target: details.querySelector(".ev-detail"), swap: "innerHTML" });
  },
  true
);
