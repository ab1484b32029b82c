// The dashboard's (and a judge's) SVG charts from the keyboard: one tab stop per chart, not one per
// mark. The server gives the first mark tabindex="0" and the others "-1" (a roving tabindex); here
// the arrow keys move between the marks (Left/Up: the one before, Right/Down: the next, Home/End:
// the first and last), and the focused mark's value shows under the chart in
// <p class="chart-value" data-chart-value> (aria-hidden: a screen reader already reads the mark's
// aria-label). Without scripts the first mark is reachable and every number is in the data table.
(function () {
  "use strict";
  var NEXT = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };

  Array.prototype.forEach.call(document.querySelectorAll("svg[data-chart-marks]"), function (svg) {
    var marks = Array.prototype.slice.call(svg.querySelectorAll("g.mark"));
    if (!marks.length) return;
    var section = svg.closest("[data-chart]");
    var label = section && section.querySelector("[data-chart-value]");

    function show(mark) {
      if (!label) return;
      label.textContent = mark ? mark.getAttribute("aria-label") : "";
      label.hidden = !mark;
    }
    function move(to) {
      marks.forEach(function (m) {
        m.setAttribute("tabindex", m === to ? "0" : "-1");
      });
      to.focus();
    }

    svg.addEventListener("keydown", function (event) {
      var at = marks.indexOf(event.target.closest ? event.target.closest("g.mark") : null);
      if (at < 0) return;
      var to = null;
      if (event.key in NEXT) to = marks[Math.min(marks.length - 1, Math.max(0, at + NEXT[event.key]))];
      else if (event.key === "Home") to = marks[0];
      else if (event.key === "End") to = marks[marks.length - 1];
      if (!to) return;
      event.preventDefault();
      move(to);
    });
    svg.addEventListener("focusin", function (event) {
      var mark = event.target.closest ? event.target.closest("g.mark") : null;
      if (mark) {
        marks.forEach(function (m) {
          m.setAttribute("tabindex", m === mark ? "0" : "-1");
        });
        show(mark);
      }
    });
    svg.addEventListener("focusout", function (event) {
      if (!svg.contains(event.relatedTarget)) show(null);
    });
  });
})();
