// Live run page: follows /ws/runs/<id>/ and applies the server's out-of-band swaps with htmx.
//
// The page says what it shows: <div id="live" data-run-id data-last-seq>. The socket is opened with
// ?last_seq=N, so whatever was committed since the page was rendered (or since the socket dropped)
// comes first, read from the event store by the server. Updates are contiguous (from_seq == the seq
// we show); anything else is a gap and we ask for a resync from our seq. Each applied update is
// acked (the server keeps at most a few un-acked updates in flight per page; a page that stops
// reading is disconnected with a resync notice and reconnects here with its seq).
//
// Timeline rows are appended only while the list shows the tail of the trace unfiltered; panels
// (status, gates, graph, ledger) are always replaced (the gate panel and the graph morphed,
// hx-swap-oob="morph": static/workbench/morph.js keeps a note being typed, its caret and selection,
// and the focus on a node of the graph); the span tree's <template class="live-spans">
// goes to static/workbench/trace.js as a "live:spans" event.
//
// Pages listing runs may carry data-live-workspace on any element: on each run change the body
// receives a "live:runs-changed" event (hx-trigger="live:runs-changed from:body" refreshes a list),
// at most once a second and once more after a refresh during which runs changed (listRefresher).
(function () {
  "use strict";
  var MAX_BACKOFF_MS = 10000;
  var FILTER_IDS = ["t-type", "t-step", "t-corr", "t-q"];

  function socketUrl(path) {
    var proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    return proto + "//" + window.location.host + path;
  }

  function backoff(attempt) {
    var base = Math.min(MAX_BACKOFF_MS, 250 * Math.pow(2, attempt));
    return base / 2 + Math.random() * base / 2;
  }

  // The run page's live indicator (<p id="live-indicator" role="status">): says in words whether the
  // page follows the run (not by colour alone). It speaks only when its state changes, and a
  // reconnect that succeeds within RECONNECT_QUIET_MS is never announced, so it is not chatty.
  var RECONNECT_QUIET_MS = 2000;
  var LIVE_TEXT = {
    connecting: "Connecting for live updates…",
    open: "Live: new events appear as they happen",
    reconnecting: "Reconnecting…",
    finished: "Finished: no new events",
    closed: "Not live: reload the page to follow this run",
    gone: "This run no longer exists"
  };

  function liveIndicator() {
    var el = document.getElementById("live-indicator");
    var finished = !!el && el.getAttribute("data-state") === "finished";
    var quiet = null;
    function show(state) {
      if (!el) return;
      if (finished && state !== "gone") state = "finished";
      if (quiet) {
        window.clearTimeout(quiet);
        quiet = null;
      }
      if (el.getAttribute("data-state") === state) return;
      el.setAttribute("data-state", state);
      el.querySelector(".live-text").textContent = LIVE_TEXT[state] || state;
    }
    return {
      set: function (state) {
        if (state === "reconnecting" || state === "connecting") {
          if (!quiet && el && el.getAttribute("data-state") === "open") {
            quiet = window.setTimeout(function () {
              quiet = null;
              show("reconnecting");
            }, RECONNECT_QUIET_MS);
          }
          return;
        }
        show(state);
      },
      status: function (runStatus) {
        if (runStatus && runStatus !== "running") {
          finished = true;
          show("finished");
        }
      }
    };
  }

  function followRun(hook) {
    var indicator = liveIndicator();
    var runId = hook.getAttribute("data-run-id");
    var lastSeq = parseInt(hook.getAttribute("data-last-seq") || "0", 10) || 0;
    var attempt = 0;
    var ws = null;
    var stopped = false;

    function setSeq(seq) {
      lastSeq = seq;
      hook.setAttribute("data-last-seq", String(seq));
    }

    function timelineAtTail(fromSeq) {
      var list = document.getElementById("timeline-list");
      if (!list) return null;
      for (var i = 0; i < FILTER_IDS.length; i++) {
        var field = document.getElementById(FILTER_IDS[i]);
        if (field && field.value) return null;
      }
      var shown = parseInt(list.getAttribute("data-last-seq") || "0", 10) || 0;
      return shown === fromSeq ? list : null;
    }

    function apply(msg) {
      var holder = document.createElement("template");
      holder.innerHTML = msg.html;
      var spans = Array.prototype.slice.call(holder.content.querySelectorAll("template.live-spans"));
      spans.forEach(function (t) {
        t.remove();
      });
      var list = timelineAtTail(msg.from_seq);
      if (!list) {
        // Not showing the tail (an older page, or filtered): keep the rows out, refresh the panels.
        var rows = holder.content.querySelectorAll("template");
        for (var i = 0; i < rows.length; i++) rows[i].remove();
      }
      window.htmx.swap(document.body, holder.innerHTML, { swapStyle: "none" });
      if (list) {
        list.setAttribute("data-last-seq", String(msg.last_seq));
        if (msg.last_seq > msg.from_seq) {
          var empty = list.parentNode && list.parentNode.querySelector(":scope > p.muted.no-events");
          if (empty) empty.remove();
        }
      }
      // The span tree's share (static/workbench/trace.js merges it).
      if (spans.length) document.dispatchEvent(new CustomEvent("live:spans", { detail: spans }));
      setSeq(msg.last_seq);
      hook.setAttribute("data-live-status", msg.status || "");
      indicator.status(msg.status);
      hook.dispatchEvent(new CustomEvent("live:update", { bubbles: true, detail: msg }));
    }

    // Acks are cumulative: one for every 4 updates (or 300 ms after the last one) is enough: at 10
    // updates/s that is 2.5 acks/s per page (the server allows 8 un-acked updates in flight).
    var unacked = 0;
    var ackTimer = null;
    function flushAck() {
      if (ackTimer) window.clearTimeout(ackTimer);
      ackTimer = null;
      unacked = 0;
      send({ type: "ack", seq: lastSeq });
    }
    function scheduleAck() {
      if (++unacked >= 4) flushAck();
      else if (!ackTimer) ackTimer = window.setTimeout(flushAck, 300);
    }

    function send(obj) {
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj));
    }

    // While an htmx request of the page is in flight, updates wait: replacing the element such a
    // request targets (a gate form inside the gate panel) would make its response land in a detached
    // node. They are applied, in order, as soon as the request is done.
    var inFlight = 0;
    var queued = [];
    document.body.addEventListener("htmx:beforeRequest", function () {
      inFlight++;
    });
    document.body.addEventListener("htmx:afterRequest", function () {
      inFlight = Math.max(0, inFlight - 1);
      if (!inFlight) window.setTimeout(drain, 0);
    });

    function drain() {
      while (!inFlight && queued.length) handle(queued.shift());
    }

    function onMessage(event) {
      var msg;
      try {
        msg = JSON.parse(event.data);
      } catch (e) {
        return;
      }
      if (inFlight || queued.length) queued.push(msg);
      else handle(msg);
    }

    function handle(msg) {
      if (msg.type === "hello") {
        attempt = 0;
        hook.setAttribute("data-live", "open");
        indicator.set("open");
      } else if (msg.type === "update") {
        if (msg.from_seq !== lastSeq) {
          send({ type: "resync", after_seq: lastSeq });
          return;
        }
        apply(msg);
        scheduleAck();
      } else if (msg.type === "resync") {
        hook.setAttribute("data-live", "resync");  // the server closes; we reconnect with our seq
      } else if (msg.type === "gone") {
        stopped = true;
        hook.setAttribute("data-live", "gone");
        indicator.set("gone");
      }
    }

    function connect() {
      if (stopped) return;
      var path = "/ws/runs/" + encodeURIComponent(runId) + "/?last_seq=" + lastSeq;
      ws = new WebSocket(socketUrl(path));
      hook.setAttribute("data-live", "connecting");
      ws.onmessage = onMessage;
      ws.onclose = function (event) {
        ws = null;
        if (stopped || event.code === 4403 || event.code === 4404) {
          hook.setAttribute("data-live", event.code === 4404 ? "gone" : "closed");
          indicator.set(event.code === 4404 ? "gone" : "closed");
          return;
        }
        hook.setAttribute("data-live", "reconnecting");
        indicator.set("reconnecting");
        var delay = event.code === 4000 ? 50 : backoff(attempt++);
        window.setTimeout(connect, delay);
      };
    }

    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && !ws && !stopped) connect();
    });
    connect();
  }

  // A list that follows the workspace refreshes at most once a second and never leaves a change
  // out. htmx's own throttle drops what comes within its second, and a refresh asked while one is
  // on its way is queued on a list that the answer then replaces (and drops): either way the list
  // would keep the state of before the burst's last changes. So the changes are counted here: one
  // refresh at a time, and a change heard during it (or within the second after it began) asks for
  // one more refresh once it has been swapped in.
  var REFRESH_MS = 1000;
  var REFRESH_STUCK_MS = 15000; // a refresh whose end was never heard: the next one goes anyway
  function listRefresher() {
    var dirty = false;
    var busySince = 0;
    var lastAt = -REFRESH_MS;
    var timer = null;
    function live(el) {
      return el && el.hasAttribute && el.hasAttribute("data-live-workspace"); // the list, not a row's form
    }
    function later(ms) {
      timer = window.setTimeout(fire, ms);
    }
    function fire() {
      if (timer) window.clearTimeout(timer);
      timer = null;
      var now = Date.now();
      if (busySince && now - busySince < REFRESH_STUCK_MS) return later(REFRESH_STUCK_MS - (now - busySince));
      if (now - lastAt < REFRESH_MS) return later(REFRESH_MS - (now - lastAt));
      dirty = false;
      busySince = 0;
      lastAt = now;
      document.body.dispatchEvent(new CustomEvent("live:runs-changed", { bubbles: true }));
    }
    function ended() {
      busySince = 0;
      if (dirty) fire(); // now, or when the second since the last refresh is over
    }
    document.body.addEventListener("htmx:beforeRequest", function (event) {
      if (live(event.target)) busySince = Date.now();
    });
    // the list's answer swapped in and settled (its new element), or no swap to come. Not at
    // afterSwap: htmx hands a new element its hx-trigger only when the swap settles (20 ms later),
    // and a refresh asked for in between reaches no list (a loaded machine's slow refresh, changes
    // heard meanwhile: the list kept the state of before them until the next change)
    document.body.addEventListener("htmx:afterSettle", function (event) {
      if (live(event.target)) ended();
    });
    // (the request's own end reaches <body> only from a list still in the page: one not replaced)
    ["htmx:afterRequest", "htmx:responseError", "htmx:sendError", "htmx:timeout", "htmx:swapError"].forEach(function (name) {
      document.body.addEventListener(name, function (event) {
        if (live(event.target)) ended();
      });
    });
    return function changed() {
      dirty = true;
      if (!timer) fire();
    };
  }

  // <html data-workspace-live="open|closed"> says whether the page hears the workspace's changes. A
  // socket open again after a drop refreshes the lists once: what changed meanwhile was not heard.
  function followWorkspace() {
    var attempt = 0;
    var opened = false;
    var changed = listRefresher();
    function connect() {
      var ws = new WebSocket(socketUrl("/ws/workspace/"));
      ws.onopen = function () {
        document.documentElement.setAttribute("data-workspace-live", "open");
        if (opened) changed();
        opened = true;
      };
      ws.onmessage = function (event) {
        var msg;
        try {
          msg = JSON.parse(event.data);
        } catch (e) {
          return;
        }
        attempt = 0;
        if (msg.type === "run.changed") changed();
      };
      ws.onclose = function (event) {
        document.documentElement.setAttribute("data-workspace-live", "closed");
        if (event.code === 4403) return;
        window.setTimeout(connect, backoff(attempt++));
      };
    }
    connect();
  }

  function start() {
    if (!window.htmx || !window.WebSocket) return;
    var hook = document.getElementById("live");
    if (hook && hook.getAttribute("data-run-id") && hook.getAttribute("data-url-id") !== "demo") followRun(hook);
    if (document.querySelector("[data-live-workspace]")) followWorkspace();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
