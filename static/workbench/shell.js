// The page shell (templates/base.html, templates/_goto.html): the sidebar and its menu button, the
// workspace switcher that switches on choice, the keyboard "go to" (Ctrl-K / Cmd-K), and relative
// times kept fresh. A file with the CSP nonce: no inline script, no style attributes (classes only).
(function () {
  "use strict";
  var root = document.documentElement;
  var body = document.body;
  var PHONE = window.matchMedia("(max-width: 899px)");

  // --- the sidebar -------------------------------------------------------------------------------
  // Wide screens: the sidebar is in the page; "«" hides it (remembered), the menu button brings it
  // back. Narrow screens: the menu button opens it over the page; Escape, a click outside or a link
  // closes it and focus goes back to the button.
  var sidebar = document.getElementById("sidebar");
  var menu = document.getElementById("menu-button");
  var hide = document.querySelector("[data-sidebar-close]");

  function remember(hidden) {
    try {
      window.localStorage.setItem("workbench.sidebar", hidden ? "hidden" : "shown");
    } catch (e) {
      /* storage refused: for this page only */
    }
  }
  function isOpen() {
    return PHONE.matches ? root.classList.contains("sidebar-open") : !root.classList.contains("sidebar-hidden");
  }
  function sync() {
    if (menu) menu.setAttribute("aria-expanded", String(isOpen()));
  }
  function open() {
    if (PHONE.matches) root.classList.add("sidebar-open");
    else {
      root.classList.remove("sidebar-hidden");
      remember(false);
    }
    sync();
    var first = sidebar.querySelector("a[aria-current], a, select, button");
    if (first) first.focus();
  }
  function close(returnFocus) {
    if (PHONE.matches) root.classList.remove("sidebar-open");
    else {
      root.classList.add("sidebar-hidden");
      remember(true);
    }
    sync();
    if (returnFocus && menu) menu.focus();
  }
  if (sidebar && menu) {
    menu.hidden = false;
    if (hide) hide.hidden = false;
    menu.addEventListener("click", function () {
      if (isOpen()) close(true);
      else open();
    });
    if (hide) {
      hide.addEventListener("click", function () {
        close(true);
      });
    }
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && PHONE.matches && root.classList.contains("sidebar-open")) {
        event.preventDefault();
        close(true);
      }
    });
    document.addEventListener("click", function (event) {
      if (!PHONE.matches || !root.classList.contains("sidebar-open")) return;
      if (!sidebar.contains(event.target) && !menu.contains(event.target)) close(false);
    });
    PHONE.addEventListener("change", function () {
      root.classList.remove("sidebar-open");
      sync();
    });
    sync();
  }

  // --- the workspace switcher: switches on choice (its button stays for pages without scripts) ---
  // A choice made with the pointer (or a picker, an assistive technology) switches at once. From
  // the keyboard a closed <select> changes its value on each arrow key (Chromium fires "change"
  // each time): browsing with the arrows switches nothing; Enter switches, and so does leaving
  // the field with another value chosen. Escape puts the current workspace back.
  var BROWSE_KEYS = /^(Arrow(Up|Down|Left|Right)|Home|End|Page(Up|Down)|.)$/;
  Array.prototype.forEach.call(document.querySelectorAll("select[data-autosubmit]"), function (select) {
    var initial = select.value;
    var byKeyboard = false;
    var sent = false;
    function submit() {
      if (sent || select.value === initial || !select.form) return;
      sent = true;
      select.form.requestSubmit();
    }
    select.addEventListener("pointerdown", function () {
      byKeyboard = false;
    });
    select.addEventListener("keydown", function (event) {
      if (event.key === "Enter") {
        event.preventDefault();
        submit();
      } else if (event.key === "Escape" && select.value !== initial) {
        select.value = initial;
      } else if (BROWSE_KEYS.test(event.key) && !event.ctrlKey && !event.metaKey) {
        byKeyboard = true;
      }
    });
    select.addEventListener("change", function () {
      if (!byKeyboard) submit();
    });
    select.addEventListener("blur", function () {
      if (byKeyboard) submit();
      byKeyboard = false;
    });
  });

  // --- relative times (runs.presenters.times writes the same words on the server) ---------------
  function relative(then, now) {
    var seconds = (now - then) / 1000;
    var ahead = seconds < 0;
    seconds = Math.abs(seconds);
    if (seconds < 45) return "just now";
    var words;
    var minutes = Math.round(seconds / 60);
    if (minutes < 60) words = Math.max(1, minutes) + " min";
    else if (seconds < 36 * 3600) words = Math.round(seconds / 3600) + " h";
    else if (seconds < 30 * 86400) {
      var days = Math.round(seconds / 86400);
      words = days + (days === 1 ? " day" : " days");
    } else return new Date(then).toISOString().slice(0, 10);
    return ahead ? "in " + words : words + " ago";
  }
  function freshen(scope) {
    var now = Date.now();
    Array.prototype.forEach.call((scope || document).querySelectorAll("time[data-rel]"), function (el) {
      var then = Date.parse(el.getAttribute("datetime"));
      if (isNaN(then)) return;
      var text = relative(then, now);
      if (el.textContent !== text) el.textContent = text;
    });
  }
  window.setInterval(function () {
    if (!document.hidden) freshen();
  }, 30000);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) freshen();
  });
  body.addEventListener("htmx:load", function (event) {
    freshen(event.target);
  });
  freshen();

  // --- go to (Ctrl-K / Cmd-K) ---------------------------------------------------------------------
  var dialog = document.getElementById("goto");
  if (!dialog || typeof dialog.showModal !== "function") return;
  var input = document.getElementById("goto-q");
  var list = document.getElementById("goto-results");
  var status = document.getElementById("goto-status");
  var runsUrl = dialog.getAttribute("data-runs-url");
  var opener = null;
  var active = -1;
  var options = [];
  var asked = 0;
  var timer = null;
  var shownFor = null; // the text whose runs the list shows
  var goWhenShown = false; // Enter came before the list caught up with the text

  // The pages: every link of the sidebar, with its group ("Review › Queues").
  function pages() {
    var out = [];
    if (!sidebar) return out;
    Array.prototype.forEach.call(sidebar.querySelectorAll("ul.nav-links"), function (ul) {
      var heading = document.getElementById(ul.getAttribute("aria-labelledby") || "");
      Array.prototype.forEach.call(ul.querySelectorAll("a[href]"), function (a) {
        var name = (a.firstChild && a.firstChild.nodeType === 3 ? a.firstChild.textContent : a.textContent).trim();
        out.push({ label: name, hint: heading ? heading.textContent.trim() : "Page", url: a.getAttribute("href") });
      });
    });
    return out;
  }

  function render(items) {
    options = items;
    list.textContent = "";
    items.forEach(function (item, i) {
      var li = document.createElement("li");
      li.id = "goto-opt-" + i;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", "false");
      li.className = "goto-option";
      var label = document.createElement("span");
      label.className = "goto-label";
      label.textContent = item.label;
      var hint = document.createElement("span");
      hint.className = "goto-hint muted";
      hint.textContent = item.hint;
      li.appendChild(label);
      li.appendChild(hint);
      li.addEventListener("click", function () {
        go(i);
      });
      list.appendChild(li);
    });
    select(items.length ? 0 : -1);
    status.textContent = items.length ? items.length + " result" + (items.length === 1 ? "" : "s") : "Nothing found";
  }

  function select(i) {
    if (active >= 0 && list.children[active]) list.children[active].setAttribute("aria-selected", "false");
    active = i;
    if (i < 0) {
      input.removeAttribute("aria-activedescendant");
      return;
    }
    var li = list.children[i];
    li.setAttribute("aria-selected", "true");
    input.setAttribute("aria-activedescendant", li.id);
    if (li.scrollIntoView) li.scrollIntoView({ block: "nearest" });
  }

  function go(i) {
    var item = options[i];
    if (!item) return;
    dialog.close();
    window.location.assign(item.url);
  }

  function search() {
    window.clearTimeout(timer);
    timer = null;
    var text = input.value.trim();
    var needle = text.toLowerCase();
    var found = pages().filter(function (p) {
      return !needle || (p.label + " " + p.hint).toLowerCase().indexOf(needle) >= 0;
    });
    var mine = ++asked;
    render(found);
    fetch(runsUrl + "?q=" + encodeURIComponent(text), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.ok ? response.json() : { runs: [] };
      })
      .then(function (data) {
        if (mine !== asked) return; // a later query answered first or is on its way
        var runs = (data.runs || []).map(function (r) {
          return { label: r.title, hint: "Run " + r.id + " · " + r.status + (r.started ? " · " + r.started : ""), url: r.url };
        });
        shown(text, found.concat(runs));
      })
      .catch(function () {
        if (mine === asked) shown(text, found);
      });
  }

  function shown(text, items) {
    render(items);
    shownFor = text;
    if (goWhenShown) {
      goWhenShown = false;
      go(active);
    }
  }

  function show() {
    if (dialog.open) return;
    opener = document.activeElement;
    if (PHONE.matches) root.classList.remove("sidebar-open");
    dialog.showModal();
    goWhenShown = false;
    shownFor = null;
    input.value = "";
    input.focus();
    search();
  }

  input.addEventListener("input", function () {
    window.clearTimeout(timer);
    timer = window.setTimeout(search, 120);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      if (!options.length) return;
      var step = event.key === "ArrowDown" ? 1 : -1;
      select((active + step + options.length) % options.length);
    } else if (event.key === "Enter") {
      event.preventDefault();
      if (shownFor === input.value.trim()) go(active);
      else {
        goWhenShown = true; // the list is behind the text: open the first result once it is there
        search();
      }
    }
  });
  dialog.addEventListener("close", function () {
    if (opener && opener.isConnected && opener.focus) opener.focus();
    opener = null;
  });
  dialog.addEventListener("click", function (event) {
    if (event.target === dialog) dialog.close(); // a click on the backdrop
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-goto-open]"), function (button) {
    button.hidden = false;
    button.addEventListener("click", show);
  });
  document.addEventListener("keydown", function (event) {
    if ((event.ctrlKey || event.metaKey) && !event.altKey && (event.key === "k" || event.key === "K")) {
      event.preventDefault();
      event.stopImmediatePropagation();
      if (dialog.open) dialog.close();
      else show();
    }
  });
})();
