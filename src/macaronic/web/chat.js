/*
 * chat.js: the Macaronic web chat (an ES module; everything it loads comes from the same server).
 *
 * Streams replies from POST /v1/chat/completions (SSE) and draws each finished message from its
 * entry, so a reload (conversations.js keeps them in localStorage) draws the same page: sanitised
 * markdown (markdown.js) with code highlighted (highlight.js, vendored), a language label and a
 * copy button on each block, tool calls as
 * collapsible blocks, GenUI cards that passed the server's validator drawn by the official
 * renderer (a2ui-card.js), a plain-words badge (badge.js) and feedback buttons (feedback.js).
 * While a card decodes the bubble shows its text_response and a placeholder (cardstream.js),
 * never the raw JSON; Stop drops an unfinished card from the history. Each surface is drawn once:
 * a later reply that draws it anew takes it over. A card's button clicks go back as a userAction
 * turn. The user can force a specialist, regenerate the last reply, edit a message (the
 * conversation resends from there) and set sampling options (settings.js). With built-in tools on,
 * the agent's calls run on the server and their results go back until it answers in text
 * (toolrun.js).
 */
import { renderCard } from "./a2ui-card.js";
import { renderCardV09 } from "./a2ui-card-v09.js";
import { renderMarkdownInto } from "./markdown.js";
import { hljs } from "./vendor/a2ui-lit.js";
import { badge } from "./badge.js";
import { looksLikeCard, partialTextResponse } from "./cardstream.js";
import * as store from "./conversations.js";
import { feedbackBar } from "./feedback.js";
import { initSettings, initTheme } from "./settings.js";
import * as toolrun from "./toolrun.js";

{
  // One example per specialist on the welcome screen (a click fills the input).
  const EXAMPLES = {
    chat: "Explain in two sentences why the sky is blue.",
    agent: "Remind me to call Sam tomorrow at 9 am.",
    coding: "Write a Python function that tells whether a string is a palindrome.",
    genui: "Show me a card to book a table for two at 7 pm.",
  };
  const CURRENT = "macaronic-current";
  const $ = (id) => document.getElementById(id);
  const log = $("log"), input = $("input"), select = $("adapter"), keyBox = $("apikey");
  const sendBtn = $("send"), stopBtn = $("stop"), toolsBox = $("tools"), builtinBox = $("builtin-tools");
  toolrun.initToggle(builtinBox);
  const settings = initSettings({ temperature: $("temperature"), maxTokens: $("max-tokens"), system: $("system"),
    a2uiVersion: $("a2ui-version") });
  initTheme($("theme"));
  const state = { conv: store.create(), cards: new Map(), roles: Object.keys(EXAMPLES), publicName: "macaronic",
    busy: false, turn: false, abort: null };

  keyBox.value = localStorage.getItem("macaronic-key") || "";
  keyBox.addEventListener("change", () => { localStorage.setItem("macaronic-key", keyBox.value); loadModels(); });

  function headers() {
    const h = { "Content-Type": "application/json" };
    if (keyBox.value) h.Authorization = "Bearer " + keyBox.value;
    return h;
  }

  async function loadModels() {
    try {
      const r = await fetch("/v1/models", { headers: headers() });
      if (!r.ok) throw new Error((await r.json()).error.message);
      const { data } = await r.json();
      while (select.options.length > 1) select.remove(1);
      for (const m of data) {
        const info = m.macaronic || {};
        if (info.kind === "routed") { state.publicName = m.id; state.roles = info.roles || state.roles; }
        if (info.kind !== "adapter") continue;
        const opt = document.createElement("option");
        opt.value = m.id;
        opt.textContent = info.role && info.role !== m.id ? `${m.id} (${info.role})` : m.id;
        select.appendChild(opt);
      }
      $("status").textContent = "";
      welcome();
    } catch (e) {
      $("status").textContent = "models: " + e.message;
    }
  }

  // ---- small pieces ----

  function button(label, title, onClick, cls = "quiet") {
    const b = document.createElement("button");
    b.type = "button";
    b.className = cls;
    b.textContent = label;
    b.title = title;
    b.addEventListener("click", () => onClick(b));
    return b;
  }

  function note(text, cls = "note") {
    const div = document.createElement("div");
    div.className = cls;
    div.textContent = text;
    return div;
  }

  async function copyText(text, btn) {
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) { // no clipboard API (an insecure origin): the old way
      const ta = document.createElement("textarea");
      ta.value = text;
      document.body.appendChild(ta);
      ta.select();
      document.execCommand("copy");
      ta.remove();
    }
    const label = btn.textContent;
    btn.textContent = "Copied";
    setTimeout(() => { btn.textContent = label; }, 1200);
  }

  // Each fenced block gets a header with its language (markdown-it's language-x class) and Copy,
  // and is highlighted when highlight.js knows the language (it escapes the text itself).
  function decorateCode(textEl) {
    for (const pre of textEl.querySelectorAll("pre")) {
      const code = pre.querySelector("code");
      const lang = ((code && code.className.match(/language-([\w+#.-]+)/)) || [])[1] || "text";
      if (code && hljs.getLanguage(lang)) hljs.highlightElement(code);
      const wrap = document.createElement("div");
      wrap.className = "code";
      const head = document.createElement("div");
      head.className = "code-head";
      const label = document.createElement("span");
      label.className = "lang";
      label.textContent = lang;
      head.append(label, button("Copy", "copy the code", (b) => copyText((code || pre).textContent, b)));
      pre.replaceWith(wrap);
      wrap.append(head, pre);
    }
  }

  function bubble(cls) {
    const div = document.createElement("div");
    div.className = "msg " + cls;
    const text = document.createElement("div");
    text.className = "text";
    div.appendChild(text);
    return div;
  }

  function scrollDown() { log.scrollTop = log.scrollHeight; }

  // ---- cards ----

  // The surface a message is for (a v0.9 message also carries its "version").
  const sidOf = (m) => Object.values(m || {}).find((v) => v && typeof v === "object")?.surfaceId;

  // A surface drawn anew later leaves the earlier card (each surface is on the page once).
  function retire(old, sid) {
    Promise.resolve().then(() => old.handle.process([deleteMessage(old.version, sid)])).catch(() => { /* already gone */ })
      .then(() => {
        if (!old.handle.size && old.box.isConnected) old.box.replaceWith(note("this card was drawn again in a later reply"));
      });
  }

  const deleteMessage = (version, sid) => ({ ...(version === "0.9" ? { version: "v0.9" } : {}), deleteSurface: { surfaceId: sid } });

  // A GenUI reply's card, drawn only if the server validated it, by the official renderer of its
  // A2UI version (v0.8: a2ui-card.js; v0.9: a2ui-card-v09.js). Surfaces live for the whole
  // conversation, as in A2UI: updates without a beginRendering / createSurface for a surface an
  // earlier reply drew (a data update, a deleteSurface) go to that card; a surface rendered anew is
  // drawn in this reply and leaves the earlier one.
  function card(div, genui) {
    if (!genui.valid) {
      const why = (genui.errors || []).map((x) => x.message).join("; ");
      div.appendChild(note("card refused (did not validate): " + why, "refused"));
      return;
    }
    const messages = Array.isArray(genui.a2ui) ? genui.a2ui : [];
    const version = messages.some((m) => m && m.version === "v0.9") ? "0.9" : "0.8";
    const creates = version === "0.9" ? "createSurface" : "beginRendering";
    const redrawn = new Set(messages.filter((m) => m && m[creates]).map(sidOf));
    const fresh = [];
    let updated = 0;
    for (const m of messages) {
      const sid = sidOf(m), old = state.cards.get(sid);
      if (!old || redrawn.has(sid) || old.version !== version) { fresh.push(m); continue; }
      Promise.resolve().then(() => old.handle.process([m]))
        .catch((e) => div.appendChild(note("card error: " + e.message, "refused")));
      updated++;
      if (m.deleteSurface) state.cards.delete(sid);
    }
    for (const sid of redrawn) {
      const old = state.cards.get(sid);
      if (old) { state.cards.delete(sid); retire(old, sid); }
    }
    if (updated && !fresh.length) div.appendChild(note("updated a card above"));
    if (!fresh.length) return;
    const box = document.createElement("div");
    box.className = "card";
    box.dataset.a2uiVersion = version;
    div.appendChild(box);
    try {
      const draw = version === "0.9" ? renderCardV09 : renderCard;
      const handle = draw(box, fresh, { onAction: (message) => send(message) });
      Promise.resolve(handle.ready).catch((e) => { box.textContent = "card error: " + e.message; });
      for (const m of fresh) {
        if (m.deleteSurface) state.cards.delete(sidOf(m)); else state.cards.set(sidOf(m), { handle, box, version });
      }
    } catch (e) {
      box.textContent = "card error: " + e.message;
    }
  }

  // Tool calls as collapsible blocks: the name in the summary, the arguments (pretty JSON) inside.
  function toolCalls(div, calls, label = "tool call") {
    for (const c of calls) {
      const box = document.createElement("details");
      box.className = "tool-call";
      const head = document.createElement("summary");
      head.textContent = label + " · " + c.function.name;
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      let args = c.function.arguments || "";
      try { args = JSON.stringify(JSON.parse(args), null, 2); } catch (e) { /* shown as sent */ }
      code.textContent = args;
      pre.appendChild(code);
      box.append(head, pre);
      div.appendChild(box);
    }
  }

  // ---- entries: one message as drawn; the same code draws a live reply and a reloaded one ----

  // What a reply's bubble says: a card's text_response (never its JSON), else the text.
  function shownText(entry) {
    const genui = entry.meta && entry.meta.genui;
    if (genui) return genui.text_response || "";
    return entry.content || "";
  }

  async function postFeedback(body) {
    const r = await fetch("/v1/feedback", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!r.ok) throw new Error((await r.json()).error.message);
  }

  function drawEntry(entry, i) {
    const conv = state.conv;
    if (entry.role === "tool") return toolrun.drawResult(entry);
    if (entry.role === "user") {
      const div = bubble("user" + (entry.label ? " action" : ""));
      div.dataset.role = "user";
      div.querySelector(".text").textContent = entry.label || entry.content;
      const acts = document.createElement("div");
      acts.className = "actions";
      acts.appendChild(button("Copy", "copy this message", (b) => copyText(entry.content, b)));
      if (!entry.label) acts.appendChild(button("Edit", "edit this message and send again from here", () => edit(div, i)));
      div.appendChild(acts);
      return div;
    }
    const div = bubble("assistant");
    const textEl = div.querySelector(".text");
    if (entry.error) {
      div.classList.add("error");
      textEl.textContent = "error: " + entry.error;
      if (i === conv.entries.length - 1) div.appendChild(button("Regenerate", "try the last message again", regenerate, "quiet regen"));
      return div;
    }
    renderMarkdownInto(textEl, shownText(entry));
    decorateCode(textEl);
    if (entry.tool_calls && entry.tool_calls.length) toolCalls(div, entry.tool_calls);
    if (entry.meta && entry.meta.genui) card(div, entry.meta.genui);
    if (entry.stopped) div.appendChild(note(entry.cut === "card" ? "stopped: the unfinished card was dropped" : "stopped"));
    if (entry.note) div.appendChild(note(entry.note, "note tool-note"));
    if (entry.meta) div.appendChild(badge(entry.meta, entry.stats, entry.id));
    const acts = document.createElement("div");
    acts.className = "actions";
    acts.appendChild(button("Copy", "copy this reply", (b) => copyText(shownText(entry), b)));
    if (i === conv.entries.length - 1) acts.appendChild(button("Regenerate", "answer the last message again", regenerate, "quiet regen"));
    if (entry.id && !entry.stopped) {
      acts.appendChild(feedbackBar(entry.id, { roles: state.roles, current: entry.feedback, post: postFeedback,
        onChange: (fb) => { entry.feedback = fb; persist(conv); } }));
    }
    div.appendChild(acts);
    return div;
  }

  function renderAll() {
    state.cards.clear();
    log.textContent = "";
    state.conv.entries.forEach((e, i) => log.appendChild(drawEntry(e, i)));
    welcome();
    paintList();
    scrollDown();
  }

  function welcome() {
    const box = $("welcome"), examples = $("examples");
    box.hidden = state.conv.entries.length > 0;
    examples.textContent = "";
    for (const role of state.roles) {
      if (!EXAMPLES[role]) continue;
      const b = button("", `fill the input with an example for the ${role} specialist`, () => {
        input.value = EXAMPLES[role];
        input.focus();
      }, "example");
      b.dataset.role = role;
      const who = document.createElement("b");
      who.textContent = role;
      b.append(who, document.createTextNode(EXAMPLES[role]));
      examples.appendChild(b);
    }
  }

  // ---- the conversation list ----

  function persist(conv) {
    if (!store.save(conv)) $("status").textContent = "this conversation could not be saved (browser storage full?)";
  }

  function open(conv) {
    document.body.classList.remove("show-sidebar"); // on a phone the list covers the chat
    state.conv = conv;
    localStorage.setItem(CURRENT, conv.id);
    renderAll();
  }

  function newChat() {
    if (state.abort) state.abort.abort();
    open(store.create());
  }

  function paintList() {
    const ul = $("conversations");
    ul.textContent = "";
    for (const c of store.loadAll()) {
      const li = document.createElement("li");
      li.dataset.id = c.id;
      if (c.id === state.conv.id) li.classList.add("current");
      const title = button(c.title || "Conversation", "open this conversation", () => { if (!state.busy) open(c); }, "open");
      const ren = button("✎", "rename", () => {
        const box = document.createElement("input");
        box.className = "rename-box";
        box.value = c.title;
        const done = () => {
          if (!box.isConnected) return;
          const renamed = store.rename(c.id, box.value);
          if (renamed && c.id === state.conv.id) state.conv.title = renamed.title;
          paintList();
        };
        box.addEventListener("keydown", (e) => { if (e.key === "Enter") done(); if (e.key === "Escape") paintList(); });
        box.addEventListener("blur", done);
        title.replaceWith(box);
        box.focus();
        box.select();
      }, "quiet rename");
      const del = button("✕", "delete", () => {
        if (!del.classList.contains("confirm")) { del.classList.add("confirm"); del.textContent = "delete?"; return; }
        store.remove(c.id);
        if (c.id === state.conv.id) newChat(); else paintList();
      }, "quiet delete");
      li.append(title, ren, del);
      ul.appendChild(li);
    }
  }

  // ---- sending ----

  async function* sse(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        for (const line of block.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") return;
          yield JSON.parse(data);
        }
      }
    }
  }

  // Streamed tool calls arrive in pieces keyed by `index` (name first, arguments as they decode).
  function mergeCalls(calls, deltas) {
    for (const d of deltas) {
      const i = d.index ?? calls.length;
      const c = calls[i] || (calls[i] = { id: "", type: "function", function: { name: "", arguments: "" } });
      if (d.id) c.id = d.id;
      if (d.type) c.type = d.type;
      if (d.function?.name) c.function.name += d.function.name;
      if (d.function?.arguments) c.function.arguments += d.function.arguments;
    }
  }

  // Busy from the first token to the turn's end, tool rounds included (`state.turn`).
  function setBusy(busy) {
    state.busy = busy || state.turn;
    sendBtn.disabled = state.busy;
    stopBtn.disabled = !state.busy;
    document.body.classList.toggle("busy", state.busy);
  }

  // What a turn sends: the built-in tools when on (they run here), then the Tools box's list (shown,
  // not run); `builtin` names the ones this page runs. Throws when the box is not JSON.
  async function tools() {
    let typed = [];
    if (toolsBox.value.trim()) {
      try { typed = JSON.parse(toolsBox.value); } catch (e) { throw new Error("tools: not JSON: " + e.message); }
      if (!Array.isArray(typed)) throw new Error("tools: expected a JSON list of tools");
    }
    const builtin = builtinBox.checked ? await toolrun.builtinTools(headers()) : [];
    const names = new Set(builtin.map((t) => t.function.name));
    const list = [...builtin, ...typed.filter((t) => !names.has(t && t.function && t.function.name))];
    return { list: list.length ? list : null, builtin: names };
  }

  // While decoding: a card shows its text_response and a placeholder, anything else its markdown.
  function paintStreaming(div, text) {
    const textEl = div.querySelector(".text");
    const cardy = looksLikeCard(text);
    renderMarkdownInto(textEl, cardy ? partialTextResponse(text) : text);
    if (cardy && !div.querySelector(".card-pending")) div.appendChild(note("drawing a card…", "card-pending"));
  }

  // Answer the conversation as it stands; while the agent calls built-in tools, run them and
  // answer again with their results (at most MAX_STEPS rounds). A turn always ends: in text, in a
  // note saying why nothing ran, or stopped.
  async function reply(tooling) {
    state.turn = true;
    try { await rounds(tooling); } finally { state.turn = false; setBusy(false); }
  }

  async function rounds(tooling) {
    const conv = state.conv;
    for (let step = 1; ; step++) {
      const entry = await replyOnce(tooling.list);
      if (entry.error || entry.stopped || state.conv !== conv) return;
      const calls = entry.tool_calls || [];
      if (!calls.length) {
        if (!tooling.list && toolrun.pretendsToAct(entry)) annotate(conv, entry, toolrun.OFF_NOTE);
        return;
      }
      const unrun = calls.filter((c) => !tooling.builtin.has(c.function.name));
      if (unrun.length) { annotate(conv, entry, toolrun.unrunNote(unrun)); return; }
      const results = await runCalls(conv, calls);
      if (!results) return;
      if (step >= toolrun.MAX_STEPS) { annotate(conv, results.at(-1), toolrun.stepsNote(step)); return; }
    }
  }

  // A note under the entry just drawn, the conversation's last (kept with it: a reload shows it too).
  function annotate(conv, entry, text) {
    entry.note = text;
    persist(conv);
    const div = log.lastElementChild;
    if (state.conv === conv && div) div.replaceWith(drawEntry(entry, conv.entries.length - 1));
  }

  // Run each call on the server, storing and drawing its result; null when stopped or failed.
  async function runCalls(conv, calls) {
    setBusy(true);
    const abort = state.abort = new AbortController();
    const results = [];
    try {
      for (const call of calls) {
        let entry;
        if (toolrun.writes(call)) {  // a change to the user's data runs only when they allow it
          const ask = toolrun.confirmCall(call, abort.signal);
          if (state.conv === conv) { log.appendChild(ask.box); scrollDown(); }
          const ok = await ask.done;
          if (abort.signal.aborted) throw new DOMException("stopped", "AbortError");
          entry = ok ? await toolrun.execute(call, headers(), abort.signal) : toolrun.declined(call);
        } else {
          entry = await toolrun.execute(call, headers(), abort.signal);
        }
        results.push(entry);
        conv.entries.push(entry);
        persist(conv);
        if (state.conv === conv) { log.appendChild(drawEntry(entry, conv.entries.length - 1)); scrollDown(); }
      }
      return results;
    } catch (e) {
      if (state.conv === conv) {
        log.appendChild(note(e.name === "AbortError" ? "stopped before the tools ran" : "tools: " + e.message,
          "msg assistant error"));
      }
      return null;
    } finally {
      if (state.abort === abort) state.abort = null;
      setBusy(false);
    }
  }

  // Stream one reply, then store and draw it; returns its entry.
  async function replyOnce(toolList) {
    const conv = state.conv;
    const div = bubble("assistant streaming");
    log.querySelectorAll(".regen").forEach((b) => b.remove());
    log.appendChild(div);
    scrollDown();
    setBusy(true);
    const abort = state.abort = new AbortController();
    const t0 = performance.now();
    let text = "", meta = null, usage = null, id = null, frame = 0, tFirst = null, deltas = 0;
    const calls = [], entry = { role: "assistant", content: "" };
    const paint = () => { frame = 0; paintStreaming(div, text); scrollDown(); };
    try {
      const messages = store.history(conv.entries);
      const system = settings.systemMessage();
      if (system) messages.unshift(system);
      const r = await fetch("/v1/chat/completions", {
        method: "POST", headers: headers(), signal: abort.signal,
        body: JSON.stringify({ model: select.value || state.publicName, messages, stream: true,
          stream_options: { include_usage: true }, ...settings.requestOptions(), ...(toolList ? { tools: toolList } : {}) }),
      });
      if (!r.ok) throw new Error((await r.json()).error.message);
      for await (const chunk of sse(r)) {
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.id) id = chunk.id;
        if (chunk.macaronic) meta = chunk.macaronic;
        if (chunk.usage) usage = chunk.usage;
        for (const choice of chunk.choices || []) {
          const delta = choice.delta || {};
          if (delta.content || delta.tool_calls) { tFirst = tFirst ?? performance.now(); deltas++; }
          if (delta.content) { text += delta.content; frame = frame || requestAnimationFrame(paint); }
          if (delta.tool_calls) mergeCalls(calls, delta.tool_calls);
        }
      }
      const tEnd = performance.now();
      // decode time from the server's clock when it sends one (text held back, e.g. while a
      // reply may still turn into a tool call, reaches the page all at once)
      const decodeMs = meta && meta.decode_ms != null ? meta.decode_ms : tFirst == null ? null : tEnd - tFirst;
      Object.assign(entry, { content: text || null, id, meta,
        stats: { tokens: usage ? usage.completion_tokens : deltas, decodeMs, elapsedMs: tEnd - t0 } });
      if (calls.length) entry.tool_calls = calls;
      if (meta) entry.adapter = meta.adapter;
    } catch (e) {
      if (e.name === "AbortError") { // keep what was said; an unfinished card (or tool call) is dropped
        entry.stopped = true;
        if (looksLikeCard(text)) { entry.content = partialTextResponse(text); entry.cut = "card"; } else entry.content = text;
        if (!entry.content) entry.omit = true;
      } else {
        entry.error = e.message;
      }
    } finally {
      if (frame) cancelAnimationFrame(frame);
      if (state.abort === abort) state.abort = null;
      setBusy(false);
      conv.entries.push(entry);
      persist(conv);
      paintList();
      if (state.conv === conv) {
        div.replaceWith(drawEntry(entry, conv.entries.length - 1));
        scrollDown();
      }
      input.focus();
    }
    return entry;
  }

  // `what` is a string (typed message) or an A2UI {userAction} from a card's button.
  async function send(what) {
    if (state.busy) return;
    let tooling;
    try { tooling = await tools(); } catch (e) { log.appendChild(note(e.message, "msg assistant error")); return; }
    const isAction = typeof what !== "string";
    const entry = isAction
      ? { role: "user", content: JSON.stringify(what), label: `▶ ${what.userAction.name} ${JSON.stringify(what.userAction.context || {})}` }
      : { role: "user", content: what };
    state.conv.entries.push(entry);
    persist(state.conv);
    localStorage.setItem(CURRENT, state.conv.id);
    log.querySelectorAll(".regen").forEach((b) => b.remove());
    log.appendChild(drawEntry(entry, state.conv.entries.length - 1));
    welcome();
    paintList();
    await reply(tooling);
  }

  // Answer the last user message again (the replies after it are dropped).
  async function regenerate() {
    if (state.busy) return;
    let tooling;
    try { tooling = await tools(); } catch (e) { log.appendChild(note(e.message, "msg assistant error")); return; }
    const entries = state.conv.entries;
    let end = entries.length;
    while (end > 0 && entries[end - 1].role !== "user") end--; // the reply and its tool rounds
    if (!end) return;
    state.conv.entries = entries.slice(0, end);
    persist(state.conv);
    renderAll();
    await reply(tooling);
  }

  // Edit a user message in place; sending it drops it and everything after, then resends.
  function edit(div, i) {
    if (state.busy) return;
    const box = document.createElement("textarea");
    box.className = "edit-box";
    box.value = state.conv.entries[i].content;
    const row = document.createElement("div");
    row.className = "actions";
    row.append(button("Send", "send the edited message", () => {
      const text = box.value.trim();
      if (!text || state.busy) return;
      state.conv.entries = state.conv.entries.slice(0, i);
      persist(state.conv);
      renderAll();
      send(text);
    }, "primary"), button("Cancel", "keep the message as it was", renderAll));
    div.classList.add("editing");
    div.replaceChildren(box, row);
    box.focus();
  }

  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || state.busy) return;
    input.value = "";
    send(text);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  stopBtn.addEventListener("click", () => state.abort && state.abort.abort());
  $("clear").addEventListener("click", newChat);
  $("export").addEventListener("click", () => store.download(state.conv));
  $("menu").addEventListener("click", (e) => { e.stopPropagation(); document.body.classList.toggle("show-sidebar"); });
  $("main").addEventListener("click", () => document.body.classList.remove("show-sidebar"));

  window.MacaronicChat = { state, send, history: () => store.history(state.conv.entries) };
  const last = store.loadAll().find((c) => c.id === localStorage.getItem(CURRENT));
  open(last || store.create());
  loadModels();
}
