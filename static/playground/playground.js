/* Playground page. The session (toggles, prompts, file, history in its exact sent form) lives here;
   every change goes to /playground/preview/ which applies the smart behaviours server-side
   (playground/compose.py) and returns the normalised session plus the exact request. Sends go to
   /playground/send/; each execution streams over /ws/playground/executions/<id>/. */
(function () {
  "use strict";
  const root = document.getElementById("playground");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const initial = JSON.parse($("pg-initial").textContent);
  const csrf = (document.body.getAttribute("hx-headers") || "").match(/"X-CSRFToken":\s*"([^"]+)"/);
  const state = { opened: initial.saved_prompt && initial.saved_prompt.version ? { name: initial.saved_prompt.name, version: initial.saved_prompt.version } : null, session: initial.session, model: initial.model, busy: false, log: [], inflight: new Map(), sentPrompt: null, conversation: { id: null, parent: null }, calls: [], cache: null, file: initial.session.file || null };
  let previewTimer = null;
  // Bumped by every edit of a control: a preview answer that left while the user kept editing
  // must not put the older values back into the controls.
  let inputGen = 0;
  root.addEventListener("input", () => { inputGen += 1; }, true);
  root.addEventListener("change", () => { inputGen += 1; }, true);

  // ---------------------------------------------------------------- server calls
  async function post(url, body) {
    const resp = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf ? csrf[1] : "" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    let data = {};
    try { data = await resp.json(); } catch (e) { data = { error: { message: "HTTP " + resp.status } }; }
    return { ok: resp.ok, status: resp.status, data };
  }

  // Previews run one after another, each from the session the previous one returned, so a slow
  // answer can never overwrite a later change. Each carries a sequence number: an answer whose
  // number is no longer the latest is stale and never shown (the latest one shows); its session
  // is kept (it carries its change) only when the page did not change the session itself since
  // it was sent (choosing a compare column does), so a late answer cannot put an older session,
  // request or column back.
  let previewChain = Promise.resolve();
  let previewSeq = 0; // the number of the latest preview asked for
  let sessionEdits = 0; // bumped whenever the page changes state.session outside a preview
  function preview(change) {
    const seq = ++previewSeq;
    previewChain = previewChain.then(() => doPreview(change, seq)).catch((e) => showComposeError(String(e)));
    return previewChain;
  }

  async function doPreview(change, seq) {
    readFreeFields();
    const sentGen = inputGen;
    const sentEdits = sessionEdits;
    const body = { session: state.session, model: $("model").value || null, seq };
    if (change) body.change = change;
    const { ok, data } = await post(root.dataset.previewUrl, body);
    if (seq !== previewSeq) {
      // Stale: a later preview was asked for and will show. Keep only what this one changed.
      if (ok && data.session && sessionEdits === sentEdits) {
        state.session = data.session;
        readFreeFields(); // the controls are the page's: edits made meanwhile stay
      }
      return;
    }
    if (!ok) { showComposeError(data.error ? data.error.message : "Cannot compose"); return; }
    state.session = data.session;
    // Controls edited while this answer was on its way win (the next preview composes them).
    if (inputGen !== sentGen) readFreeFields();
    renderControls();
    const pre = $("request-preview");
    pre.textContent = data.request ? JSON.stringify(data.request, null, 2) : "";
    const notes = $("notes");
    notes.replaceChildren(...(data.notes || []).map((n) => el("li", {}, n)));
    const cacheNotes = (data.notes || []).filter((n) => /caches (prompts )?from/.test(n));
    $("cache-hint").textContent = cacheNotes.join(" ");
    $("cache-hint").hidden = !cacheNotes.length;
    showComposeError(data.compose_error ? data.compose_error.message : (data.problem || ""));
  }

  function schedulePreview() {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(() => preview(null), 250);
  }

  // ---------------------------------------------------------------- DOM helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }
  function showComposeError(message) {
    const box = $("compose-error");
    box.textContent = message || "";
    box.hidden = !message;
  }
  function setChecked(id, value) { $(id).checked = !!value; }

  // ---------------------------------------------------------------- controls <-> session
  function readFreeFields() {
    const s = state.session;
    // The file is the page's own (like the text fields): a preview answering late cannot undo a
    // file chosen meanwhile.
    s.file = state.file;
    s.prompt = $("prompt").value;
    s.system_prompt = $("system-prompt").value;
    s.send_system_prompt = $("send-system-prompt").checked;
    s.send_file = $("send-file").checked;
    s.create_cache = $("create-cache").checked;
    s.citations = $("citations").checked;
    s.tool_use = $("tool-use").checked;
    s.operation_type = $("operation-type").value;
    s.advanced.temperature.value = Number($("temperature").value || 1);
    s.advanced.top_p.value = Number($("top-p").value || 1);
    s.advanced.top_k.value = parseInt($("top-k").value || "40", 10);
    s.tool_results = {};
    document.querySelectorAll("[data-tool-result]").forEach((input) => { s.tool_results[input.dataset.toolResult] = input.value; });
    const toolsError = $("tools-error");
    toolsError.hidden = true;
    if (s.tool_use) {
      try { s.tools = JSON.parse($("tools").value || "[]"); } catch (e) {
        toolsError.textContent = "Tools are not valid JSON: " + e.message; toolsError.hidden = false; s.tools = [];
      }
    } else { s.tools = []; }
  }

  // Item 26: the operation type is chosen in a sheet (each type with its description and badge)
  function showOperation(id) {
    const radio = document.querySelector('input[name="operation_choice"][value="' + CSS.escape(id) + '"]');
    if (!radio) return;
    radio.checked = true;
    $("operation-current").textContent = radio.dataset.name;
    $("operation-current-badge").textContent = radio.dataset.structured === "1" ? "Structured" : "Text";
    $("operation-hint").textContent = radio.dataset.description + " " + radio.dataset.guidance;
  }

  // Item 31: an operation type's defaults (global, then the workspace's) apply when it is chosen;
  // what the person changes afterwards is the session's (levels: global, workspace, prompt,
  // operation type, session).
  let operationApplied = null; // {id, values: {temperature?, thinking?, citations?}, scopes}
  function applyOperationDefaults(id) {
    const d = ((initial.levels || {}).operation_defaults || {})[id];
    operationApplied = null;
    if (!d) return;
    const s = state.session, values = {}, scopes = {};
    if (d.temperature) { s.advanced.temperature = { enabled: true, value: d.temperature.value }; values.temperature = s.advanced.temperature; scopes.temperature = d.temperature.scope; }
    if (d.thinking) { s.thinking = d.thinking.value; values.thinking = s.thinking; scopes.thinking = d.thinking.scope; }
    if (d.citations) { s.citations = d.citations.value; values.citations = s.citations; scopes.citations = d.citations.scope; }
    operationApplied = { id, values: JSON.parse(JSON.stringify(values)), scopes };
  }
  function operationSource(key, current) {
    if (!operationApplied || !(key in operationApplied.values)) return null;
    if (JSON.stringify(current) !== JSON.stringify(operationApplied.values[key])) return null;
    return "operation type “" + operationApplied.id + "” (" + operationApplied.scopes[key] + ")";
  }

  function chooseOperation(id) {
    readFreeFields();
    $("operation-type").value = id;
    state.session.operation_type = id;
    applyOperationDefaults(id);
    renderControls();
    showOperation(id);
    $("operation-type").dispatchEvent(new Event("change"));
  }

  function renderControls() {
    const s = state.session;
    const a = s.advanced;
    document.querySelectorAll("[data-mode]").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.mode === s.mode)));
    $("mode-hint").textContent = s.mode === "stateful" ? "History is sent with each message." : "Each message stands alone; output is cleared between messages.";
    if (document.activeElement !== $("prompt")) $("prompt").value = s.prompt;
    if (document.activeElement !== $("system-prompt")) $("system-prompt").value = s.system_prompt;
    setChecked("send-system-prompt", s.send_system_prompt);
    setChecked("send-file", s.send_file);
    setChecked("create-cache", s.create_cache);
    setChecked("thinking", s.thinking);
    setChecked("citations", s.citations);
    setChecked("tool-use", s.tool_use);
    $("tools-row").hidden = !s.tool_use;
    if (s.tools && s.tools.length && document.activeElement !== $("tools")) $("tools").value = JSON.stringify(s.tools, null, 1);
    $("operation-type").value = s.operation_type;
    showOperation(s.operation_type);
    // Item 8: the toggle only when there is a system prompt to send
    $("send-system-prompt-row").hidden = !(s.system_prompt || "").trim();
    $("file-info").hidden = !s.file;
    $("send-file-row").hidden = !s.file;
    if (s.file) {
      $("file-name").textContent = s.file.name;
      $("file-size").textContent = s.file.media_type + " · " + Math.round(s.file.data.length / 1024) + " KB";
    }
    $("max-tokens").value = a.max_tokens;
    $("budget-row").hidden = !s.thinking;
    $("thinking-budget").value = a.thinking_budget;
    $("thinking-budget").max = a.max_tokens - 1;
    override("temperature", a.temperature, 1.0);
    $("temperature-enabled").disabled = s.thinking;
    if (s.thinking) $("temperature-hint").textContent = "Not available while thinking is on.";
    override("top-p", a.top_p, 1.0);
    override("top-k", a.top_k, 40);
    setChecked("stop-enabled", a.stop_enabled);
    $("stop-list").replaceChildren(...a.stop_sequences.map((seq, i) => {
      const rm = el("button", { type: "button", "aria-label": "Remove stop sequence " + seq, "data-remove-stop": String(i) }, "×");
      return el("li", {}, el("code", { text: seq }), " ", rm);
    }));
    $("stop-add").disabled = a.stop_sequences.length >= 4;
    renderToolResults();
    renderContext();
    renderLevels();
  }

  // ---------------------------------------------------------------- configuration levels
  const baseline = JSON.parse(JSON.stringify(initial.session)); // what the page opened with
  const initialModel = initial.model ? String(initial.model) : null;
  const DEFAULTS = { max_tokens: 4096, thinking_budget: 10000, temperature: { enabled: false, value: 1 }, top_p: { enabled: false, value: 1 }, top_k: { enabled: false, value: 40 }, stop_enabled: false, stop_sequences: [] };
  function sourceOf(current, opened, dflt) {
    const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
    if (initial.saved_prompt && same(current, opened)) return "saved prompt “" + initial.saved_prompt.name + "”" + (initial.saved_prompt.version ? " version " + initial.saved_prompt.version : "");
    if (initial.origin && same(current, opened)) return "the recorded call";
    if (same(current, dflt)) return "global default";
    return "this page (session)";
  }
  function renderLevels() {
    const L = initial.levels;
    if (!L) return;
    const s = state.session, a = s.advanced, b = baseline.advanced;
    const pk = $("model").value;
    const m = L.models[pk];
    let modelFrom;
    if (initialModel && pk === initialModel) {
      modelFrom = initial.saved_prompt ? "saved prompt “" + initial.saved_prompt.name + "”" : (initial.origin ? "the recorded call" : "your last send (remembered for you)");
    } else if (!initialModel && pk === String(L.effective_default)) {
      modelFrom = String(L.workspace_default) === pk ? "workspace default" : (String(L.global_default) === pk ? "global default" : "first usable model");
    } else { modelFrom = "this page (session)"; }
    const onOff = (o) => (o.enabled ? "sent: " + o.value : "not sent");
    const rows = [
      ["Model", m ? m.label : "—", modelFrom],
      ["Provider and key", m ? m.provider + " · key: " + m.key_source : "—", m ? (m.provider_scope === "workspace" ? "workspace" : "global") : ""],
      ["Timeout and retries", m ? m.timeout + " s, " + m.retries + " retries" : "—", m ? (m.provider_scope === "workspace" ? "workspace (provider settings)" : "global (provider settings)") : ""],
      ["Prices", m ? (m.priced ? "known" : "unknown (cost shown as unknown)") : "—", m ? (m.model_scope === "workspace" ? "workspace" : "global") : ""],
      ["Operation type", s.operation_type, sourceOf(s.operation_type, baseline.operation_type, "generic")],
      ["System prompt", s.system_prompt ? (s.send_system_prompt ? "sent" : "not sent") : "none", sourceOf([s.system_prompt, s.send_system_prompt], [baseline.system_prompt, baseline.send_system_prompt], ["", true])],
      ["Max tokens", String(a.max_tokens), sourceOf(a.max_tokens, b.max_tokens, DEFAULTS.max_tokens)],
      ["Temperature", onOff(a.temperature), operationSource("temperature", a.temperature) || sourceOf(a.temperature, b.temperature, DEFAULTS.temperature)],
      ["Top P", onOff(a.top_p), sourceOf(a.top_p, b.top_p, DEFAULTS.top_p)],
      ["Top K", onOff(a.top_k), sourceOf(a.top_k, b.top_k, DEFAULTS.top_k)],
      ["Stop sequences", a.stop_enabled && a.stop_sequences.length ? a.stop_sequences.join(", ") : "not sent", sourceOf([a.stop_enabled, a.stop_sequences], [b.stop_enabled, b.stop_sequences], [false, []])],
      ["Thinking", s.thinking ? "on, budget " + a.thinking_budget : "off", operationSource("thinking", s.thinking) || sourceOf([s.thinking, a.thinking_budget], [baseline.thinking, b.thinking_budget], [false, 10000])],
      ["Citations", s.citations ? "on" : "off", operationSource("citations", s.citations) || sourceOf(s.citations, baseline.citations, false)],
      ["Mode", s.mode, sourceOf(s.mode, baseline.mode, "stateful")],
    ];
    $("levels-table").tBodies[0].replaceChildren(...rows.map(([name, value, from]) =>
      el("tr", { "data-level": name }, el("th", { scope: "row" }, name), el("td", {}, value), el("td", {}, from))));
  }

  function override(id, value, dflt) {
    setChecked(id + "-enabled", value.enabled);
    if (document.activeElement !== $(id)) $(id).value = value.value;
    if ($(id + "-out")) $(id + "-out").textContent = String(value.value);
    $(id).disabled = !value.enabled;
    $(id + "-hint").textContent = value.enabled ? "Default: " + dflt + " → Sending: " + value.value : "Not sent: the model uses its default (" + dflt + ").";
  }

  function pendingToolUses() {
    const h = state.session.history;
    if (!h.length || h[h.length - 1].role !== "assistant" || !Array.isArray(h[h.length - 1].content)) return [];
    return h[h.length - 1].content.filter((b) => b.type === "tool_use" && !/^record_/.test(b.name));
  }

  function renderToolResults() {
    const uses = pendingToolUses();
    $("tool-results").hidden = uses.length === 0;
    const box = $("tool-result-fields");
    const existing = {};
    box.querySelectorAll("[data-tool-result]").forEach((i) => { existing[i.dataset.toolResult] = i.value; });
    box.replaceChildren(...uses.map((u) => {
      const id = "tool-result-" + u.id;
      const input = el("textarea", { id, rows: "2", "data-tool-result": u.id });
      input.value = existing[u.id] || state.session.tool_results[u.id] || "";
      return el("div", { class: "pg-row" }, el("label", { for: id }, "Result of " + u.name + " (" + u.id + ")"), input);
    }));
  }

  function renderContext() {
    const last = [...state.log].reverse().find((m) => m.role === "assistant" && m.context);
    const box = $("context");
    if (state.session.mode !== "stateful" || !last) { box.textContent = ""; return; }
    const c = last.context;
    box.textContent = "Context: " + c.used.toLocaleString() + "/" + c.window.toLocaleString() + " (" + c.percent + "%) • " + c.remaining.toLocaleString() + " remaining";
  }

  // ---------------------------------------------------------------- conversation
  function textOf(content) {
    if (typeof content === "string") return content;
    return content.filter((b) => b.type === "text").map((b) => b.text).join(" ");
  }

  function flagsLine(flags) {
    const yes = (v) => (v ? "✓" : "✗");
    return el("div", { class: "pg-flags" },
      el("span", {}, "Mode: " + (flags.mode === "stateful" ? "Stateful" : "Stateless")),
      el("span", {}, "Cache: " + yes(flags.create_cache)),
      el("span", {}, "System prompt: " + yes(flags.system_prompt)),
      el("span", {}, "File: " + yes(flags.file)),
      el("span", {}, "Thinking: " + yes(flags.thinking)),
      el("span", {}, "Citations: " + yes(flags.citations)),
      el("span", {}, "Operation: " + flags.operation_type),
      flags.prompt ? el("span", {}, "Prompt: " + flags.prompt.name + " version " + flags.prompt.version) : null);
  }

  function addUserMessage(userContent, flags) {
    const docs = Array.isArray(userContent) ? userContent.filter((b) => b.type === "document") : [];
    const li = el("li", { class: "pg-msg pg-msg-user", "data-role": "user" },
      el("div", { class: "pg-msg-head" }, el("strong", {}, "You"), el("time", {}, new Date().toLocaleTimeString())),
      flagsLine(flags),
      docs.length ? el("p", { class: "pg-hint" }, "📎 " + docs.map((d) => d.title || "document").join(", ")) : null,
      el("p", { class: "pg-user-tokens", "data-user-tokens": "" }),
      el("div", { class: "pg-stream" }, textOf(userContent)));
    $("conversation").append(li);
    state.lastUser = li;
    state.log.push({ role: "user", content: userContent, flags, at: new Date().toISOString() });
  }

  function addAssistantSlot(ex, container) {
    const badge = el("span", { class: "pg-badge pg-badge-" + ex.status, "data-status-badge": "" }, statusLabel(ex.status));
    const thinking = el("div", { class: "pg-stream-thinking", "data-stream": "thinking" });
    const text = el("div", { class: "pg-stream", "data-stream": "text" });
    const body = el("div", { "data-body": "" }, thinking, text);
    const item = el("div", { class: "pg-msg pg-msg-assistant", "data-execution": ex.id, "data-role": "assistant" },
      el("div", { class: "pg-msg-head" }, el("strong", {}, "Assistant" + (ex.label ? " · " + ex.label : "")), badge), body);
    container.append(item);
    const entry = { role: "assistant", execution: ex.id, model: ex.model, status: ex.status, content: null, text: "", thinking: "" };
    state.log.push(entry);
    const slot = { item, badge, thinking, text, body, entry, userLi: state.lastUser };
    item._slot = slot;
    return slot;
  }

  function statusLabel(status) {
    return { pending: "⏳ Pending", processing: "⚡ Processing", completed: "✓ Completed", failed: "✗ Failed", incomplete: "◐ Incomplete", cancelled: "■ Stopped" }[status] || status;
  }

  function follow(ex, slot, primary) {
    state.inflight.set(ex.id, slot);
    slot.entry.execution = ex.id;
    slot.item.dataset.execution = ex.id;
    const got = { text: 0, thinking: 0 };
    let finished = false;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    let socket;
    try { socket = new WebSocket(scheme + location.host + ex.ws_url); } catch (e) { poll(); return; }
    socket.addEventListener("message", (event) => {
      const msg = JSON.parse(event.data);
      if (msg.type === "delta") {
        if (msg.offset !== got[msg.kind]) {
          if (msg.offset > got[msg.kind]) { got.text = 0; got.thinking = 0; slot.text.textContent = ""; slot.thinking.textContent = ""; socket.send(JSON.stringify({ type: "resync" })); }
          return;
        }
        slot[msg.kind].append(msg.text);
        got[msg.kind] += msg.text.length;
      } else if (msg.type === "status") {
        setStatus(slot, msg.status);
      } else if (msg.type === "done") {
        finished = true;
        done(msg.state, msg.html, slot, primary);
        socket.close();
      }
    });
    socket.addEventListener("close", () => { if (!finished) poll(); });
    function poll() {
      if (finished) return;
      fetch("/playground/executions/" + ex.id + "/", { credentials: "same-origin" }).then((r) => r.json()).then((st) => {
        slot.text.textContent = st.partial_text || ""; slot.thinking.textContent = st.partial_thinking || "";
        if (st.status !== "pending" && st.status !== "processing") {
          finished = true;
          fetch("/playground/executions/" + ex.id + "/message/", { credentials: "same-origin" }).then((r) => r.text()).then((html) => done(st, html, slot, primary));
        } else { setStatus(slot, st.status); setTimeout(poll, 500); }
      });
    }
  }

  function setStatus(slot, status) {
    slot.badge.className = "pg-badge pg-badge-" + status;
    slot.badge.textContent = statusLabel(status);
    slot.item.dataset.status = status;
    slot.entry.status = status;
  }

  async function done(st, html, slot, primary) {
    state.inflight.delete(st.id);
    setStatus(slot, st.status);
    const tpl = document.createElement("template");
    tpl.innerHTML = html; // server-rendered by Django (escaped)
    slot.body.replaceChildren(tpl.content);
    Object.assign(slot.entry, { content: st.content, text: st.partial_text, thinking: st.partial_thinking, usage: st.usage, cost: st.cost, currency: st.currency, duration_ms: st.duration_ms, structured_output: st.structured_output, error: st.error, run_id: st.run_id, context: st.context, provider: st.provider, at: new Date().toISOString() });
    const head = slot.item.querySelector(".pg-msg-head");
    if (head && !head.querySelector("time")) head.append(el("time", { datetime: slot.entry.at }, new Date().toLocaleTimeString()));
    if (st.usage && slot.userLi && primary) {
      const u = st.usage;
      slot.userLi.querySelector("[data-user-tokens]").textContent = "Input: " + u.input_tokens.toLocaleString() + " tokens (" + (u.cache_read_tokens || 0).toLocaleString() + " cached)";
    }
    if (st.usage && (st.usage.cache_read_tokens > 0 || st.usage.cache_write_tokens > 0)) {
      state.cache = { until: Date.now() + 300000, read: st.usage.cache_read_tokens || 0, written: st.usage.cache_write_tokens || 0, provider: st.provider, at: Date.now() };
    }
    // Session totals survive Clear and stateless sends (they count what this page spent); a call
    // whose usage the provider did not report counts as unknown, never as zero.
    if (st.usage) state.calls.push({ usage: st.usage, cost: st.cost, currency: st.currency });
    else if (st.status === "completed" || st.status === "incomplete") state.calls.push({ usage: null, cost: null, currency: st.currency });
    renderTotals();
    renderCache();
    slot.primary = primary;
    if (primary) {
      if (st.status === "completed" && state.sentPrompt !== null) {
        // The prompt is kept until its answer arrives; cleared only if it was not edited since.
        if ($("prompt").value === state.sentPrompt) { $("prompt").value = ""; state.session.prompt = ""; sessionEdits += 1; }
        state.sentPrompt = null;
      }
      if (st.status === "completed" && state.session.mode === "stateful") state.conversation.parent = st.id;
      await preview({ name: "after_send", value: st.id });
      $("send-status").textContent = st.status === "completed" ? "Done." : st.status === "incomplete" ? "Incomplete: the answer was cut off (" + (st.error ? st.error.code : "") + "). It is not in the history: continue with it, or press Retry." : (st.status === "cancelled" ? "Stopped." : "Failed: " + (st.error ? st.error.code : "")) + (st.status === "completed" ? "" : " Your message is kept: edit it or press Retry.");
    }
    if (!state.inflight.size) idle();
    renderJoin();
    renderContext();
  }

  // ---------------------------------------------------------------- compare columns
  function addColumn() {
    const list = $("compare-columns");
    if (list.children.length >= 4) return;
    const node = $("compare-template").content.firstElementChild.cloneNode(true);
    const select = node.querySelector("[data-col=model]");
    for (const opt of $("model").options) select.append(new Option(opt.textContent, opt.value));
    select.value = $("model").value;
    list.append(node);
    relabelColumns();
  }
  function relabelColumns() {
    [...$("compare-columns").children].forEach((li, i) => {
      const label = String.fromCharCode(66 + i);
      li.dataset.label = label;
      li.querySelector("[data-col-label]").textContent = "Column " + label;
      li.querySelectorAll("[data-col]").forEach((input) => input.setAttribute("aria-label", "Column " + label + " " + input.dataset.col.replace("_", " ")));
    });
    $("compare-add").disabled = $("compare-columns").children.length >= 4;
  }
  function readColumns() {
    return [...$("compare-columns").children].map((li) => {
      const column = { label: li.dataset.label };
      li.querySelectorAll("[data-col]").forEach((input) => {
        const v = input.value.trim();
        if (!v) return;
        const name = input.dataset.col;
        if (name === "model") column.model = v;
        else if (name === "prompt" || name === "system_prompt") column[name] = input.value;
        else column[name] = Number(v);
      });
      return column;
    });
  }
  function renderJoin() {
    const row = state.compareRow;
    if (!row) return;
    const allDone = row.slots.every((s) => !["pending", "processing"].includes(s.entry.status));
    row.slots.forEach((slot, i) => {
      const box = slot.item.querySelector("[data-join]");
      if (!box) return;
      if (slot.entry.execution === row.chosen && slot.entry.status === "completed") {
        box.replaceChildren(el("span", { class: "pg-join-chosen", "data-joined": "" }, "✓ This answer joins the history"));
      } else if (slot.entry.status === "completed" && allDone) {
        const btn = el("button", { type: "button", "data-choose": String(i) }, "Continue with this answer");
        btn.addEventListener("click", () => choose(i));
        box.replaceChildren(btn);
      } else {
        box.replaceChildren(slot.entry.execution === row.chosen ? el("span", { class: "pg-hint" }, "Joins the history once it answers") : "");
      }
    });
  }
  async function choose(index) {
    const row = state.compareRow;
    if (!row || state.busy) return;
    const slot = row.slots[index];
    const column = row.columns[index] || {};
    // Undo the previous choice, take the column's own settings, then add its exchange. An answer
    // to an earlier preview still on its way must not bring the previous column back.
    sessionEdits += 1;
    state.session.history = JSON.parse(JSON.stringify(row.before.history));
    state.session.cached = [...row.before.cached];
    if (column.system_prompt !== undefined) { state.session.system_prompt = column.system_prompt; state.session.send_system_prompt = !!column.system_prompt.trim(); $("system-prompt").value = column.system_prompt; }
    ["temperature", "top_p", "top_k"].forEach((name) => { if (column[name] !== undefined) state.session.advanced[name] = { enabled: true, value: column[name] }; });
    if (column.max_tokens !== undefined) state.session.advanced.max_tokens = column.max_tokens;
    renderControls();
    if (column.model) $("model").value = String(column.model);
    row.chosen = slot.entry.execution;
    state.conversation.parent = slot.entry.execution;
    await preview({ name: "after_send", value: slot.entry.execution });
    renderJoin();
  }

  // ---------------------------------------------------------------- cache lifetime and session totals
  function renderCache() {
    const c = state.cache;
    const box = $("cache-status");
    if (!c) { box.hidden = true; return; }
    box.hidden = false;
    const left = Math.max(0, Math.round((c.until - Date.now()) / 1000));
    const what = c.read > 0 ? "last request read " + c.read.toLocaleString() + " tokens from the cache" : "last request wrote " + c.written.toLocaleString() + " tokens to the cache";
    const ttl = c.provider === "openai" ? "automatic prefix cache, kept about 5 to 10 minutes of inactivity" : "5-minute lifetime, renewed by every hit";
    box.dataset.left = String(left);
    box.textContent = left > 0
      ? "Cache: " + what + " · about " + Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0") + " left (" + ttl + ")"
      : "Cache: expired (" + ttl + "); the next marked request writes it again";
  }
  setInterval(renderCache, 1000);

  function renderTotals() {
    const done = state.calls;
    const box = $("session-totals");
    if (!done.length) { box.hidden = true; return; }
    let input = 0, cached = 0, written = 0, output = 0, unknown = 0, unreported = 0;
    const cost = {};
    for (const m of done) {
      if (!m.usage) { unknown += 1; unreported += 1; continue; }
      input += m.usage.input_tokens || 0; cached += m.usage.cache_read_tokens || 0;
      written += m.usage.cache_write_tokens || 0; output += m.usage.output_tokens || 0;
      if (m.cost === null || m.cost === undefined) unknown += 1; else cost[m.currency] = (cost[m.currency] || 0) + Number(m.cost);
    }
    const money = Object.entries(cost).map(([cur, v]) => v.toFixed(6) + " " + cur).join(" + ") || "unknown";
    box.hidden = false;
    box.textContent = "Session: " + done.length + " call" + (done.length > 1 ? "s" : "") + " · input " + input.toLocaleString() + " (" + cached.toLocaleString() + " read from cache, " + written.toLocaleString() + " written) · output " + output.toLocaleString() + " · cost " + money + (unknown && Object.keys(cost).length ? " (+ " + unknown + " of unknown cost)" : "") + (unreported ? " · " + unreported + " call" + (unreported > 1 ? "s" : "") + " with unknown usage" : "");
  }

  function idle() {
    state.busy = false;
    $("send").disabled = false;
    $("stop").hidden = true;
  }

  async function stopAll() {
    const ids = [...state.inflight.keys()];
    $("stop").disabled = true;
    await Promise.all(ids.map((id) => post("/playground/executions/" + id + "/cancel/", {})));
    $("stop").disabled = false;
  }

  // A cut answer joins the history only when the tester says so.
  async function adoptPartial(executionId, button) {
    await previewChain; // an answer's own preview still on its way: the page is idle after it
    if (state.busy) return;
    button.disabled = true;
    if (state.session.mode === "stateful") state.conversation.parent = executionId;
    if (state.sentPrompt !== null && $("prompt").value === state.sentPrompt) { $("prompt").value = ""; state.session.prompt = ""; }
    state.sentPrompt = null;
    await preview({ name: "adopt_partial", value: executionId });
    button.replaceWith(el("span", { class: "pg-join-chosen", "data-adopted": "" }, "✓ This partial answer joins the history"));
    $("send-status").textContent = "The partial answer joins the history.";
  }

  async function retry(executionId, button) {
    // A Retry pressed as soon as the failure shows, while that answer's own preview is still on
    // its way, waits for it (the page is idle after it) instead of being silently ignored.
    await previewChain;
    if (state.busy) return;
    const item = button.closest("[data-role=assistant]");
    const slot = item && item._slot;
    if (!slot) return;
    button.disabled = true;
    const { ok, data } = await post("/playground/executions/" + executionId + "/retry/", {});
    if (!ok) { button.disabled = false; showComposeError(data.error ? data.error.message : "Retry failed"); return; }
    state.busy = true;
    $("send").disabled = true;
    $("stop").hidden = false;
    $("send-status").textContent = "Retrying…";
    slot.thinking.textContent = ""; slot.text.textContent = "";
    slot.body.replaceChildren(slot.thinking, slot.text);
    Object.assign(slot.entry, { status: data.status, retry_of: executionId });
    if (state.compareRow && state.compareRow.chosen === executionId) state.compareRow.chosen = data.id;
    setStatus(slot, data.status);
    follow(data, slot, !!slot.primary);
  }

  async function send() {
    if (state.busy) return;
    readFreeFields();
    showComposeError("");
    const columns = readColumns();
    const body = { session: state.session, model: $("model").value || null, compare: columns,
      conversation: state.session.mode === "stateful" ? state.conversation : null,
      prompt_version: state.opened };
    state.busy = true;
    $("send").disabled = true;
    $("send-status").textContent = "Sending…";
    state.sentPrompt = $("prompt").value;
    const { ok, data } = await post(root.dataset.sendUrl, body);
    if (!ok) {
      state.busy = false; $("send").disabled = false; $("send-status").textContent = ""; state.sentPrompt = null;
      showComposeError(data.error ? data.error.message : "Send failed");
      return;
    }
    if (state.session.mode === "stateless") { $("conversation").replaceChildren(); state.log = []; }
    if (data.conversation) state.conversation.id = data.conversation;
    // Older compare rows can no longer change the history: the conversation moved on.
    document.querySelectorAll(".pg-join").forEach((j) => j.replaceChildren());
    state.compareRow = null;
    const first = data.executions[0];
    addUserMessage(first.user_content, first.flags);
    let container = $("conversation");
    if (data.executions.length > 1) {
      const row = el("li", { class: "pg-compare", "data-compare": data.compare_group });
      container.append(row);
      container = row;
    } else {
      const li = el("li", {});
      container.append(li);
      container = li;
    }
    $("stop").hidden = false;
    const slots = data.executions.map((ex, i) => { const slot = addAssistantSlot(ex, container); slot.primary = i === 0; return slot; });
    if (data.compare_group) {
      state.compareRow = {
        slots,
        columns: [{ model: body.model }, ...columns],
        chosen: data.joins_history,
        before: { history: JSON.parse(JSON.stringify(state.session.history)), cached: [...(state.session.cached || [])] },
      };
      slots.forEach((slot) => slot.item.append(el("div", { class: "pg-join", "data-join": "" })));
      renderJoin();
    }
    data.executions.forEach((ex, i) => follow(ex, slots[i], i === 0));
    $("send-status").textContent = "Streaming…";
  }

  // ---------------------------------------------------------------- export
  function exportConversation() {
    readFreeFields();
    const data = {
      exported_at: new Date().toISOString(),
      model: $("model").selectedOptions[0] ? $("model").selectedOptions[0].textContent.trim() : null,
      mode: state.session.mode,
      system_prompt: state.session.system_prompt,
      operation_type: state.session.operation_type,
      history: state.session.history,
      messages: state.log,
    };
    const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
    const a = el("a", { href: URL.createObjectURL(blob), download: "playground-conversation.json" });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  // ---------------------------------------------------------------- file
  function readFile(file) {
    const isPdf = file.type === "application/pdf" || /\.pdf$/i.test(file.name);
    const reader = new FileReader();
    reader.onload = () => {
      let data = reader.result;
      if (isPdf) data = String(data).split(",", 2)[1] || "";
      state.file = { name: file.name, media_type: isPdf ? "application/pdf" : (file.type || "text/plain"), data };
      // A newly chosen file is meant to be sent: tick "Send file" again (readFreeFields reads it).
      state.session.send_file = true;
      $("send-file").checked = true;
      preview(null);
    };
    if (isPdf) reader.readAsDataURL(file); else reader.readAsText(file);
  }

  // ---------------------------------------------------------------- wiring
  document.querySelectorAll("[data-mode]").forEach((b) => b.addEventListener("click", async () => {
    const mode = b.dataset.mode;
    const before = state.session.mode;
    await preview({ name: "mode", value: mode });
    // Stateless answers are not part of any history: switching to stateful starts clean.
    if (mode === "stateful" && before === "stateless") { $("conversation").replaceChildren(); state.log = []; state.compareRow = null; renderContext(); }
    if (mode === "stateless") { $("conversation").replaceChildren(); state.log = []; state.conversation = { id: null, parent: null }; }
  }));
  $("thinking").addEventListener("change", (e) => preview({ name: "thinking", value: e.target.checked }));
  $("max-tokens").addEventListener("change", (e) => preview({ name: "max_tokens", value: parseInt(e.target.value || "1", 10) }));
  $("thinking-budget").addEventListener("change", (e) => preview({ name: "thinking_budget", value: parseInt(e.target.value || "1024", 10) }));
  $("temperature-enabled").addEventListener("change", (e) => preview({ name: "temperature_enabled", value: e.target.checked }));
  $("top-p-enabled").addEventListener("change", (e) => preview({ name: "top_p_enabled", value: e.target.checked }));
  $("top-k-enabled").addEventListener("change", (e) => preview({ name: "top_k_enabled", value: e.target.checked }));
  $("stop-enabled").addEventListener("change", (e) => preview({ name: "stop_enabled", value: e.target.checked }));
  $("stop-add").addEventListener("click", () => { const v = $("stop-input").value; $("stop-input").value = ""; preview({ name: "add_stop_sequence", value: v }); });
  $("stop-list").addEventListener("click", (e) => { const i = e.target.dataset.removeStop; if (i !== undefined) preview({ name: "remove_stop_sequence", value: parseInt(i, 10) }); });
  $("reset-advanced").addEventListener("click", () => preview({ name: "reset_advanced", value: null }));
  $("clear").addEventListener("click", async () => { await preview({ name: "clear", value: null }); $("conversation").replaceChildren(); state.log = []; state.conversation = { id: null, parent: null }; renderContext(); });
  $("export").addEventListener("click", exportConversation);
  $("send").addEventListener("click", send);
  $("stop").addEventListener("click", stopAll);
  $("compare-add").addEventListener("click", addColumn);
  $("compare-columns").addEventListener("click", (e) => { if (e.target.closest("[data-col-remove]")) { e.target.closest("[data-column]").remove(); relabelColumns(); } });
  $("prompt").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) send(); });
  $("file").addEventListener("change", (e) => { if (e.target.files[0]) readFile(e.target.files[0]); });
  $("file-remove").addEventListener("click", () => { state.file = null; $("file").value = ""; preview(null); });
  ["send-system-prompt", "send-file", "create-cache", "citations", "tool-use", "operation-type", "model", "temperature", "top-p", "top-k"].forEach((id) =>
    $(id).addEventListener("change", () => preview(null)));
  ["prompt", "system-prompt", "tools"].forEach((id) => $(id).addEventListener("input", schedulePreview));
  ["temperature", "top-p"].forEach((id) => $(id).addEventListener("input", () => { $(id + "-out").textContent = $(id).value; }));
  $("operation-open").addEventListener("click", () => $("operation-sheet").showModal());
  $("operation-close").addEventListener("click", () => $("operation-sheet").close());
  $("operation-sheet").addEventListener("change", (e) => { if (e.target.name === "operation_choice") chooseOperation(e.target.value); });
  $("operation-sheet").addEventListener("close", () => $("operation-open").focus());
  $("system-prompt").addEventListener("input", () => { $("send-system-prompt-row").hidden = !$("system-prompt").value.trim(); });
  $("save-prompt").addEventListener("click", async () => {
    readFreeFields();
    const { ok, data } = await post(root.dataset.saveUrl, { session: state.session, model: $("model").value || null, name: $("save-name").value });
    $("save-status").textContent = ok ? "Saved version " + data.version + " of “" + data.name + "”." : (data.error ? data.error.message : "Not saved");
    if (ok) state.opened = { name: data.name, version: data.version }; // sends record it while the text is this version's
  });
  // structured output: formatted/raw toggle and copy (delegated: answers arrive later)
  $("conversation").addEventListener("click", (e) => {
    const btn = e.target.closest("button[data-action]");
    if (!btn) return;
    if (btn.dataset.action === "retry") { retry(btn.dataset.execution, btn); return; }
    if (btn.dataset.action === "adopt-partial") { adoptPartial(btn.dataset.execution, btn); return; }
    const box = btn.closest(".pg-structured");
    if (!box) return;
    if (btn.dataset.action === "view") {
      const view = btn.dataset.view;
      box.querySelector(".pg-formatted").hidden = view !== "formatted";
      box.querySelectorAll("[data-view-pane]").forEach((pane) => { pane.hidden = pane.dataset.viewPane !== view; });
      box.querySelectorAll("button[data-view]").forEach((b) => b.setAttribute("aria-pressed", String(b === btn)));
      box.dataset.view = view;
    } else if (btn.dataset.action === "copy" && navigator.clipboard) {
      const pane = box.querySelector("[data-view-pane=" + (box.dataset.view === "xml" ? "xml" : "json") + "]");
      navigator.clipboard.writeText(pane.textContent).then(() => { btn.textContent = "Copied"; });
    }
  });

  // ---------------------------------------------------------------- start
  if (initial.model) $("model").value = String(initial.model);
  const origin = initial.origin;
  if (origin) {
    $("origin").hidden = false;
    $("origin-ref").replaceChildren("Model call at seq " + origin.seq + " of run ", el("a", { href: "/runs/" + encodeURIComponent(origin.run_id) + "/" }, origin.run_id), " (" + (origin.provider || "?") + " / " + (origin.model || "?") + ").");
    if (origin.restore && origin.restore.status === "exact") { $("origin-ref").append(" " + origin.restore.message); }
    if (origin.problem) { $("origin-problem").textContent = origin.problem; $("origin-problem").hidden = false; }
    if (origin.model_notice) { $("origin-model-notice").textContent = origin.model_notice; $("origin-model-notice").hidden = false; }
    if (origin.response) {
      $("origin-response-box").hidden = false;
      $("origin-response").textContent = origin.response.text || origin.response.summary || "";
      const u = origin.response.usage || {};
      $("origin-usage").textContent = "Input " + (u.inputTokens ?? "?") + " · output " + (u.outputTokens ?? "?") + " · cached " + (u.cachedInputTokens ?? 0) + (origin.response.cost ? " · cost " + origin.response.cost.amount + " " + origin.response.cost.currency : " · cost unknown");
    }
    // show the restored history as the conversation so far
    const hist = state.session.history;
    for (let i = 0; i < hist.length; i++) {
      const m = hist[i];
      const docs = Array.isArray(m.content) ? m.content.filter((b) => b.type === "document") : [];
      const li = el("li", { class: "pg-msg pg-msg-" + m.role, "data-role": m.role, "data-restored": "" },
        el("div", { class: "pg-msg-head" }, el("strong", {}, m.role === "user" ? "You (restored)" : "Assistant (restored)")),
        docs.length ? el("p", { class: "pg-hint", "data-documents": "" }, "📎 " + docs.map((d) => (d.title || "document") + " (" + (d.source && d.source.type === "base64" ? "PDF" : Math.round(((d.source && d.source.data) || "").length / 1024) + " KB text") + ")").join(", ")) : null,
        el("div", { class: "pg-stream" }, textOf(m.content)));
      $("conversation").append(li);
    }
    $("request-preview-box").open = true;
  }
  renderControls();
  preview(null);
})();
