// Loaded in <head>, before the first paint (blocking, tiny): says the page has scripts, so the phone
// menu starts closed and the sidebar starts hidden when the person hid it (static/workbench/shell.js).
// Without scripts the sidebar stays in the page's flow and the workspace switcher keeps its button.
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.add("js");
  try {
    if (window.localStorage.getItem("workbench.sidebar") === "hidden") root.classList.add("sidebar-hidden");
  } catch (e) {
    /* storage refused: the sidebar shows */
  }
})();
