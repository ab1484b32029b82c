// The "morph" swap style (htmx extension, on <body> as hx-ext="morph"): live refreshes morph the page
// in place with idiomorph (static/vendor/idiomorph) instead of replacing it, so what a person is
// using survives them: the field with the focus keeps its node, value, caret and selection (and an
// IME composition), and a field anyone typed into, a box ticked, an option chosen or a <details>
// opened keeps that state even when not focused. Used by the lists that refresh on the workspace's
// changes (hx-swap="morph"), by the sections that poll while a job runs (an experiment's or an
// import's status: the focus stays on their Cancel button) and by the run page's panels pushed
// over the websocket (hx-swap-oob="morph", static/workbench/live.js). A decision's own answer
// still uses outerHTML: the row it replaces is finished with.
(function () {
  "use strict";
  if (!window.htmx || !window.Idiomorph) return;

  // A control whose state differs from what its HTML said: the person changed it.
  function changedByPerson(el, attr) {
    var tag = el.tagName;
    if (tag === "TEXTAREA") return attr === "value" && el.value !== el.defaultValue;
    if (tag === "OPTION") return attr === "selected" && el.selected !== el.defaultSelected;
    if (tag === "DETAILS") return attr === "open";
    if (tag !== "INPUT" || el.type === "hidden" || el.type === "file") return false;
    if (el.type === "checkbox" || el.type === "radio") return attr === "checked" && el.checked !== el.defaultChecked;
    return attr === "value" && el.value !== el.defaultValue;
  }

  var CONFIG = {
    morphStyle: "outerHTML",
    ignoreActiveValue: true, // the focused field's value is never written
    restoreFocus: true, // a focused field that had to be replaced gets focus and caret back
    callbacks: {
      beforeAttributeUpdated: function (attr, el) {
        return changedByPerson(el, attr) ? false : undefined;
      },
    },
  };

  window.htmx.defineExtension("morph", {
    isInlineSwap: function (swapStyle) {
      return swapStyle === "morph";
    },
    handleSwap: function (swapStyle, target, fragment) {
      if (swapStyle !== "morph") return undefined;
      return window.Idiomorph.morph(target, fragment.children, CONFIG);
    },
  });
})();
