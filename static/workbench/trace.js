// The run page's trace view (templates/runs/trace.html): a span tree loaded one level at a time.
// Click or Enter selects a span (its detail pane loads, ?span=<seq> goes in the URL) and opens or
// closes its children; the arrow keys walk the tree as the WAI-ARIA tree pattern says
// (Up/Down: previous/next visible span, Right: open or first child, Left: close or parent,
// Home/End). "Show more spans…" loads the next page of a level in place.
// Live (static/workbench/live.js dispatches "live:spans" with each update's <template class=
// "live-spans">): new spans join their level when that level is loaded and complete (no "Show
// more" left: they come with it), a span that gets its first child becomes openable, an end
// updates its span's badge and duration, and a page that showed no span yet gets the whole panel.
(function () {
  "use strict";
  if (!window.htmx) return;
  var tree, pane, treeUrl, spanBase;

  function init() {
    tree = document.getElementById("span-tree");
    if (!tree || tree.hasAttribute("data-ready")) return;
    tree.setAttribute("data-ready", "");
    pane = document.getElementById("span-detail");
    treeUrl = tree.getAttribute("data-tree-url");
    spanBase = tree.getAttribute("data-span-base");
    tree.addEventListener("click", onClick);
    tree.addEventListener("keydown", onKey);
  }

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

  function onClick(event) {
    var item = event.target.closest('[role="treeitem"]');
    if (!item || !tree.contains(item)) return;
    event.stopPropagation();
    focusItem(item);
    activate(item);
  }

  function onKey(event) {
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
  }

  // "Jump to first error": select it without leaving the page (the link works without JS too; a
  // live update may replace the link, so the listener is the document's).
  document.addEventListener("click", function (event) {
    var jump = event.target.closest && event.target.closest("#jump-first-error");
    if (!jump || !tree) return;
    event.preventDefault();
    var seq = jump.getAttribute("data-span");
    var item = document.getElementById("span-" + seq);
    if (item) {
      focusItem(item);
      select(item);
    } else {
      // not shown (its level is closed): the page opens the tree down to it
      window.location.assign(jump.href);
      return;
    }
    pane.focus();
  });

  function lastWithId(spanId) {
    var found = tree.querySelectorAll('[role="treeitem"][data-span-id="' + window.CSS.escape(spanId) + '"]');
    return found.length ? found[found.length - 1] : null;
  }

  // The group a new span joins, or null when that level is not shown (closed and never loaded,
  // paged with "Show more" left, a flat list of failed or found spans, a parent not on the page).
  function groupFor(node) {
    var parentId = node.getAttribute("data-parent") || "";
    if (!parentId) return tree.hasAttribute("data-flat") ? null : tree;
    var parent = lastWithId(parentId);
    if (!parent) return null;
    var group = parent.querySelector(':scope > [role="group"]');
    if (!group) {
      group = document.createElement("ul");
      group.setAttribute("role", "group");
      group.hidden = true;
      parent.appendChild(group);
      parent.setAttribute("aria-expanded", "false");
      return null; // its children load when it is opened
    }
    return group.hasAttribute("data-loaded") ? group : null;
  }

  function addNode(node) {
    if (document.getElementById(node.id)) return;
    var group = groupFor(node);
    if (!group || group.querySelector(':scope > [data-more]')) return;
    var parent = group === tree ? null : group.closest('[role="treeitem"]');
    node.setAttribute("aria-level", String(parent ? Number(parent.getAttribute("aria-level") || "1") + 1 : 1));
    node.setAttribute("tabindex", "-1");
    var empty = group.querySelector(':scope > li.muted:not([data-seq])');
    if (empty) empty.remove();
    group.appendChild(node);
  }

  function endNode(end) {
    var item = lastWithId(end.getAttribute("data-end-of") || "");
    if (!item || !item.classList.contains("sn-open")) return;
    var status = end.getAttribute("data-status") || "ok";
    item.classList.remove("sn-open");
    item.classList.add("sn-" + status);
    var line = item.querySelector(":scope > .sn-line");
    if (!line) return;
    var badge = line.querySelector(":scope > .badge");
    if (badge) badge.remove();
    var newBadge = end.querySelector(".badge");
    var name = line.querySelector(":scope > .sn-name");
    if (newBadge && name) name.insertAdjacentElement("afterend", newBadge);
    var dur = line.querySelector(":scope > .sn-dur");
    var newDur = end.querySelector(".sn-dur");
    if (dur && newDur) dur.replaceWith(newDur);
  }

  function merge(template) {
    if (template.hasAttribute("data-section")) {
      var slot = document.getElementById("trace-slot");
      if (slot) {
        slot.replaceWith(template.content.cloneNode(true));
        init();
      }
      return;
    }
    if (!tree) return;
    var content = template.content.cloneNode(true);
    Array.prototype.forEach.call(content.querySelectorAll("li.sn"), addNode);
    Array.prototype.forEach.call(content.querySelectorAll("li.sn-end"), endNode);
    var failed = content.querySelector("#trace-failed-slot");
    var shown = document.getElementById("trace-failed-slot");
    if (failed && shown) shown.replaceWith(failed);
  }

  document.addEventListener("live:spans", function (event) {
    Array.prototype.forEach.call(event.detail || [], merge);
  });

  init();
})();
