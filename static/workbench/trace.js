// The run page's trace view (templates/runs/trace.html): a span tree loaded one level at a time.
// Click or Enter selects a span (its detail pane loads, ?span=<seq> goes in the URL) and opens or
// closes its children; the arrow keys walk the tree as the WAI-ARIA tree pattern says
// (Up/Down: previous/next visible span, Right: open or first child, Left: close or parent,
// Home/End). "Show more spans…" loads the next page of a level in place.
(function () {
  "use strict";
  var tree = document.getElementById("span-tree");
  if (!tree || !window.htmx) return;
  var pane = document.getElementById("span-detail");
  var treeUrl = tree.getAttribute("data-tree-url");
  var spanBase = tree.getAttribute("data-span-base");

  function visible() {
    return Array.prototype.filter.call(tree.querySelectorAll('[role="treeitem"]'), function (item) {
      return !item.closest('[role="group"][hidden]');
    });
  }

  function focusItem(item) {
    if (!item) return;
    tree.querySelectorAll('[role="treeitem"][tabindex="0"]').forEach(function (other) {
      other.setAttribute("tabindex", "-1");
    });
    item.setAttribute("tabindex", "0");
    item.focus();
  }

  function setUrl(seq) {
    var params = new URLSearchParams(window.location.search);
    if (seq) params.set("span", seq);
    else params.delete("span");
    var query = params.toString();
    window.history.replaceState(null, "", window.location.pathname + (query ? "?" + query : "") + "#trace");
  }

  function select(item) {
    var seq = item.getAttribute("data-seq");
    if (!seq || seq === "0") return;
    tree.querySelectorAll('[aria-selected="true"]').forEach(function (other) {
      other.setAttribute("aria-selected", "false");
    });
    item.setAttribute("aria-selected", "true");
    setUrl(seq);
    window.htmx.ajax("GET", spanBase + seq + "/", { target: pane, swap: "innerHTML" });
  }

  function open(item, then) {
    var group = item.querySelector(':scope > [role="group"]');
    if (!group) return;
    item.setAttribute("aria-expanded", "true");
    group.hidden = false;
    if (group.hasAttribute("data-loaded")) {
      if (then) then(group);
      return;
    }
    group.setAttribute("data-loaded", "");
    var depth = Number(item.getAttribute("aria-level") || "1") + 1;
    var url = treeUrl + "?span=" + item.getAttribute("data-seq") + "&depth=" + depth;
    window.htmx.ajax("GET", url, { target: group, swap: "innerHTML" }).then(function () {
      if (then) then(group);
    });
  }

  function close(item) {
    var group = item.querySelector(':scope > [role="group"]');
    if (!group) return;
    item.setAttribute("aria-expanded", "false");
    group.hidden = true;
  }

  function more(item) {
    var url = item.getAttribute("data-more");
    var previous = item.previousElementSibling;
    window.htmx.ajax("GET", url, { target: item, swap: "outerHTML" }).then(function () {
      focusItem(previous ? previous.nextElementSibling : null);
    });
  }

  function activate(item) {
    if (item.hasAttribute("data-more")) return more(item);
    select(item);
    if (item.getAttribute("aria-expanded") === "false") open(item);
    else if (item.getAttribute("aria-expanded") === "true") close(item);
  }

  tree.addEventListener("click", function (event) {
    var item = event.target.closest('[role="treeitem"]');
    if (!item || !tree.contains(item)) return;
    event.stopPropagation();
    focusItem(item);
    activate(item);
  });

  tree.addEventListener("keydown", function (event) {
    var item = event.target.closest('[role="treeitem"]');
    if (!item) return;
    var items = visible();
    var at = items.indexOf(item);
    var handled = true;
    switch (event.key) {
      case "ArrowDown":
        focusItem(items[at + 1]);
        break;
      case "ArrowUp":
        focusItem(items[at - 1]);
        break;
      case "Home":
        focusItem(items[0]);
        break;
      case "End":
        focusItem(items[items.length - 1]);
        break;
      case "ArrowRight":
        if (item.getAttribute("aria-expanded") === "false") open(item);
        else if (item.getAttribute("aria-expanded") === "true")
          focusItem(item.querySelector(':scope > [role="group"] > [role="treeitem"]'));
        break;
      case "ArrowLeft":
        if (item.getAttribute("aria-expanded") === "true") close(item);
        else {
          var parent = item.parentElement && item.parentElement.closest('[role="treeitem"]');
          if (parent) focusItem(parent);
        }
        break;
      case "Enter":
      case " ":
        activate(item);
        break;
      default:
        handled = false;
    }
    if (handled) event.preventDefault();
  });

  // "Jump to first error": select it without leaving the page (the link works without JS too).
  var jump = document.getElementById("jump-first-error");
  if (jump) {
    jump.addEventListener("click", function (event) {
      event.preventDefault();
      var seq = jump.getAttribute("data-span");
      var item = document.getElementById("span-" + seq);
      if (item) {
        focusItem(item);
        select(item);
      } else {
        setUrl(seq);
        window.htmx.ajax("GET", spanBase + seq + "/", { target: pane, swap: "innerHTML" });
      }
      pane.focus();
    });
  }
})();
