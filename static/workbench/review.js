// Keyboard-first review (gate panel, inbox, annotation queues). Loaded with the CSP nonce as a file:
// no inline script, no eval, no style attributes.
//
// Markup contract:
//   [data-review-item="<key>"] tabindex=-1   one pending item (an inbox row, a gate of the panel)
//     [data-key-action=approve|reject|edit]  its buttons (a / r / e)
//     [data-key-note]                         its note field (n)
//     [data-key-limit]                        a budget gate's new limit: approve needs it filled
//   button[data-undo="<what is said>"]        submits only after an undo delay (Approve)
//   [data-review-fallback]                    where focus goes when no pending item is left
//   #shortcuts-help (a <dialog>), #undo-toast  from templates/runs/_review_keys.html
// Shortcuts never fire while typing in a field; Escape leaves the field for its item,
// Ctrl/Cmd+Enter in a note approves its item.
(function () {
  "use strict";
  var body = document.body;
  function undoMs() {
    return parseInt(body.getAttribute("data-undo-ms") || "5000", 10);
  }
  var pending = {}; // item key -> {timer, form, data, said}
  var wantKey = null; // the item focus belongs to after the next swap
  var lastIndex = 0;
  var prefix = null; // "g" waiting for its second key
  var help = document.getElementById("shortcuts-help");

  function typing(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable) return true;
    if (el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    if (el.tagName !== "INPUT") return false;
    return !/^(checkbox|radio|button|submit|reset|range|color|file)$/.test(el.type);
  }

  function items() {
    return Array.prototype.filter.call(document.querySelectorAll("[data-review-item]"), function (el) {
      return !el.hasAttribute("data-review-done") && el.getClientRects().length > 0;
    });
  }

  function itemOf(el) {
    var it = el && el.closest ? el.closest("[data-review-item]") : null;
    return it && !it.hasAttribute("data-review-done") ? it : null;
  }

  function focusItem(el) {
    if (!el) return false;
    el.focus();
    if (el.scrollIntoView) el.scrollIntoView({ block: "nearest" });
    wantKey = el.getAttribute("data-review-item");
    lastIndex = Math.max(0, items().indexOf(el));
    return true;
  }

  function fallback() {
    var el = document.querySelector("[data-review-fallback]") || document.getElementById("main");
    if (el) el.focus();
  }

  function move(delta) {
    var list = items();
    if (!list.length) return fallback();
    var cur = itemOf(document.activeElement);
    var i = cur ? list.indexOf(cur) + delta : delta > 0 ? 0 : list.length - 1;
    focusItem(list[Math.max(0, Math.min(list.length - 1, i))]);
  }

  // The item after `el` (or before it when it was the last), `el` itself excluded.
  function neighbour(el) {
    var list = items();
    var i = list.indexOf(el);
    var rest = list.filter(function (x) {
      return x !== el;
    });
    if (!rest.length) return null;
    return i < 0 ? rest[Math.min(lastIndex, rest.length - 1)] : rest[Math.min(i, rest.length - 1)];
  }

  function advanceFrom(el) {
    var next = neighbour(el);
    wantKey = next ? next.getAttribute("data-review-item") : null;
    if (!focusItem(next)) fallback();
  }

  // After any swap (a decision's answer, a live refresh) focus is never left on <body> by it: when
  // the swap took the focused element out of the page, focus goes to the item it belonged to (or
  // the next). Focus on <body> by the reader's own doing (nothing focused yet, a click on the
  // page's text) stays there: a live event never pulls a reader back to the gate.
  var lastFocused = null;
  function restoreFocus() {
    markPending();
    var active = document.activeElement;
    if (active && active !== body && document.contains(active)) return;
    if (!lastFocused || lastFocused.isConnected) return;
    var list = items();
    var keyed = wantKey && document.querySelector('[data-review-item="' + CSS.escape(wantKey) + '"]');
    if (keyed && list.indexOf(keyed) >= 0) return focusItem(keyed);
    if (list.length) return focusItem(list[Math.min(lastIndex, list.length - 1)]);
    fallback();
  }
  body.addEventListener("htmx:afterSwap", restoreFocus); // not only after settling: no 20 ms on <body>
  body.addEventListener("htmx:afterSettle", restoreFocus);
  body.addEventListener("htmx:oobAfterSwap", function () {
    window.setTimeout(restoreFocus, 0);
  });
  // Whatever else takes the focused element out of the page (a swap whose events never reach
  // <body>, such as one into a list replaced meanwhile; a script), focus does not stay on <body>.
  if (window.MutationObserver) {
    new MutationObserver(function () {
      var active = document.activeElement;
      if ((!active || active === body) && lastFocused && !lastFocused.isConnected) restoreFocus();
    }).observe(body, { childList: true, subtree: true });
  }

  // Focus that leaves an element still in the page went where the reader sent it (a click on the
  // page's text, say): nothing to put back when that element is swapped away later.
  document.addEventListener("focusout", function (event) {
    var left = event.target;
    if (event.relatedTarget) return;
    window.setTimeout(function () {
      if (left === lastFocused && left.isConnected && document.activeElement === body) lastFocused = null;
    }, 0);
  });

  document.addEventListener("focusin", function (event) {
    lastFocused = event.target;
    var it = itemOf(event.target);
    if (it) {
      wantKey = it.getAttribute("data-review-item");
      lastIndex = Math.max(0, items().indexOf(it));
    }
  });

  // --- undo before an approval commits --------------------------------------------------------
  var toast = document.getElementById("undo-toast");
  var toastText = toast && toast.querySelector("[data-undo-text]");
  var undoButton = toast && toast.querySelector("button");

  function say(text, withUndo) {
    if (!toast) return;
    toast.hidden = false;
    toastText.textContent = text;
    undoButton.hidden = !withUndo;
  }

  function markPending() {
    Object.keys(pending).forEach(function (key) {
      var el = document.querySelector('[data-review-item="' + CSS.escape(key) + '"]');
      if (el) {
        el.setAttribute("data-review-done", "pending");
        el.classList.add("review-pending");
      }
    });
  }

  function hiddenValue(form, name, value) {
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.appendChild(input);
    return input;
  }

  function commit(key) {
    var entry = pending[key];
    if (!entry) return;
    delete pending[key];
    // the item's form as it is now (a live refresh may have replaced the one that was submitted)
    var el = document.querySelector('[data-review-item="' + CSS.escape(key) + '"]');
    var form = (el && el.querySelector("form")) || entry.form;
    if (form.isConnected) {
      hiddenValue(form, entry.name, entry.value);
      form.setAttribute("data-commit-now", "1");
      form.requestSubmit();
      form.removeAttribute("data-commit-now");
    } else {
      // the row was refreshed away meanwhile: the same POST, then a refresh of the list
      // (asked as htmx would, so that the answer's HX-Trigger says the decision in #inbox-status)
      fetch(form.action, {
        method: "POST",
        body: entry.data,
        credentials: "same-origin",
        headers: { "HX-Request": "true" },
      }).then(function (response) {
        var said = response.headers.get("HX-Trigger");
        var events = said && said.charAt(0) === "{" ? JSON.parse(said) : {};
        Object.keys(events).forEach(function (name) {
          body.dispatchEvent(new CustomEvent(name, { detail: events[name] }));
        });
        body.dispatchEvent(new CustomEvent("live:runs-changed"));
      });
    }
    say(entry.said + ": sent.", false);
  }

  function undoLast() {
    var keys = Object.keys(pending);
    if (!keys.length) return;
    var key = keys[keys.length - 1];
    window.clearTimeout(pending[key].timer);
    delete pending[key];
    var el = document.querySelector('[data-review-item="' + CSS.escape(key) + '"]');
    if (el) {
      el.removeAttribute("data-review-done");
      el.classList.remove("review-pending");
      focusItem(el);
    }
    say("Undone: nothing was sent.", false);
  }
  if (undoButton) undoButton.addEventListener("click", undoLast);

  // Send what is still waiting when the page goes away (the decision was made).
  window.addEventListener("pagehide", function () {
    Object.keys(pending).forEach(function (key) {
      window.clearTimeout(pending[key].timer);
      navigator.sendBeacon(pending[key].form.action, pending[key].data);
      delete pending[key];
    });
  });

  function carrySubmitter(form, button) {
    Array.prototype.forEach.call(form.querySelectorAll("input[data-submitter-copy]"), function (copy) {
      copy.remove();
    });
    if (!button || !button.name || button.form !== form) return;
    hiddenValue(form, button.name, button.value).setAttribute("data-submitter-copy", "");
  }

  document.addEventListener(
    "submit",
    function (event) {
      var form = event.target;
      var button = event.submitter;
      var item = itemOf(form);
      // htmx takes over a swapped-in form only when the swap settles (20 ms later): a submit in
      // between (an approval sent from its undo timer, a quick key) would leave the page as a
      // plain POST. Processed now, its htmx listener (on the form, after this one) takes it.
      if (window.htmx && (form.hasAttribute("hx-post") || form.hasAttribute("hx-get"))) window.htmx.process(form);
      // htmx learns which button was pressed from its own click listener, which a form it had not
      // processed yet (a click as the page loads on a slow machine, or just after a swap) lacks:
      // it would post without the button's value ("Choose approve, reject or edit."). A hidden
      // copy of the pressed button's value goes with the form whoever sends it.
      carrySubmitter(form, button);
      if (form.hasAttribute("data-commit-now")) return;
      if (button && button.hasAttribute("data-undo") && item && undoMs() > 0) {
        event.preventDefault();
        event.stopImmediatePropagation();
        var key = item.getAttribute("data-review-item");
        var said = button.getAttribute("data-undo");
        var seconds = Math.round(undoMs() / 1000);
        pending[key] = {
          form: form,
          name: button.name,
          value: button.value,
          data: new FormData(form, button),
          said: said,
          timer: window.setTimeout(function () {
            commit(key);
          }, undoMs()),
        };
        markPending();
        say(said + " in " + seconds + " s.", true);
        advanceFrom(item);
        return;
      }
      if (item && !event.defaultPrevented) {
        // the answer replaces the item: focus goes on to the next one
        var next = neighbour(item);
        wantKey = next ? next.getAttribute("data-review-item") : null;
      }
    },
    true
  );

  // --- annotation queue items (templates/review/item.html) ----------------------------------
  var queueForm = document.querySelector("[data-queue-form]");

  function scoreFields() {
    return Array.prototype.slice.call(queueForm.querySelectorAll("[data-score-field]"));
  }

  function focusField(field) {
    var control = field && (field.querySelector("input:checked") || field.querySelector("input"));
    if (control) control.focus();
  }

  function queueKey(event) {
    var target = event.target;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      queueForm.querySelector("[data-queue-submit]").click();
      return true;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return false;
    var fields = scoreFields();
    var current = target.closest ? target.closest("[data-score-field]") : null;
    var radio = target.type === "radio";
    if (typing(target) && !radio) {
      if (event.key === "Escape") {
        event.preventDefault();
        target.blur();
        (current || queueForm).setAttribute("tabindex", "-1");
        (current || queueForm).focus();
        return true;
      }
      return false;
    }
    if (/^[1-9]$/.test(event.key)) {
      var field = current || fields[0];
      var options = field ? field.querySelectorAll("input[type=radio]") : [];
      var pick = options[parseInt(event.key, 10) - 1];
      if (pick) {
        event.preventDefault();
        pick.checked = true;
        pick.focus();
        return true;
      }
      return false;
    }
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      var i = fields.indexOf(current);
      var next = event.key === "ArrowDown" ? i + 1 : i < 0 ? fields.length - 1 : i - 1;
      focusField(fields[Math.max(0, Math.min(fields.length - 1, next))]);
      return true;
    }
    if (event.key === "s" || (event.key === "ArrowRight" && !radio)) {
      event.preventDefault();
      queueForm.querySelector("[data-queue-skip]").click();
      return true;
    }
    if (event.key === "ArrowLeft" && !radio) {
      event.preventDefault();
      window.history.back();
      return true;
    }
    return false;
  }

  if (queueForm) {
    document.addEventListener("keydown", function (event) {
      if (help && help.open) return;
      if (queueKey(event)) event.stopImmediatePropagation();
    });
    focusField(scoreFields()[0]);
  }

  // --- the shortcuts -----------------------------------------------------------------------

  // A run's budget gate goes on only with a new budget ([data-key-limit]): the approve key never
  // sends one without it; it takes the reviewer to the field and says what is missing.
  function needsLimit(it) {
    var limit = it.querySelector("[data-key-limit]");
    if (!limit || limit.checkValidity()) return false;
    limit.focus();
    limit.reportValidity();
    return true;
  }

  function act(name) {
    var it = itemOf(document.activeElement);
    if (!it) return focusItem(items()[0]); // the first key picks the first item, it decides nothing
    if (name === "note") {
      var note = it.querySelector("[data-key-note]");
      if (!note) return false;
      note.focus();
      return true;
    }
    var button = it.querySelector('[data-key-action="' + name + '"]');
    if (!button) return false;
    if (name === "approve" && needsLimit(it)) return true;
    if (name === "edit") {
      var edit = it.querySelector("details[data-edit]");
      if (edit && !edit.open) {
        edit.open = true;
        var field = edit.querySelector("select, textarea");
        if (field) field.focus();
        return true;
      }
    }
    button.click();
    return true;
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (typing(target)) {
      if (event.key === "Escape" && itemOf(target)) {
        event.preventDefault();
        focusItem(itemOf(target));
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && target.hasAttribute("data-key-note")) {
        event.preventDefault();
        var approve = itemOf(target) && itemOf(target).querySelector('[data-key-action="approve"]');
        if (approve && !needsLimit(itemOf(target))) approve.click();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (help && help.open) return; // the dialog handles its own keys (Escape closes it)
    var key = event.key;
    if (prefix === "g") {
      prefix = null;
      if (key === "i") {
        var inbox = document.querySelector("[data-inbox-link]");
        if (inbox) {
          event.preventDefault();
          window.location.assign(inbox.href);
        }
      }
      return;
    }
    var handled = true;
    if (key === "j") move(1);
    else if (key === "k") move(-1);
    else if (key === "a") handled = act("approve");
    else if (key === "r") handled = act("reject");
    else if (key === "e") handled = act("edit");
    else if (key === "n") handled = act("note");
    else if (key === "u") undoLast();
    else if (key === "g") prefix = "g";
    else if (key === "?" && help) help.showModal();
    else handled = false;
    if (handled) event.preventDefault();
  });

  if (help) {
    var close = help.querySelector("[data-close]");
    if (close)
      close.addEventListener("click", function () {
        help.close();
      });
  }
  // "Review N pending gates": straight to the first pending item.
  document.addEventListener("click", function (event) {
    var start = event.target.closest ? event.target.closest("[data-review-start]") : null;
    if (start && items().length) {
      event.preventDefault();
      focusItem(items()[0]);
    }
  });

  var opener = document.querySelector("[data-shortcuts-open]");
  if (opener && help)
    opener.addEventListener("click", function () {
      help.showModal();
    });
})();
