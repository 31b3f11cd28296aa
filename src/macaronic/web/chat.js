/*
 * chat.js: the Macaronic web chat (an ES module; everything it loads comes from the same server).
 *
 * Streams replies from POST /v1/chat/completions (SSE), shows a badge per turn from the final
 * chunk's `macaronic` metadata (specialist, policy, confidence, prefill/reused tokens), lets the
 * user force an adapter (the model id), renders replies as sanitised markdown (markdown.js), tool
 * calls as collapsible blocks (the Tools box sends an OpenAI `tools` list with each turn),
 * GenUI replies that passed the server's validator as A2UI cards
 * drawn by the official renderer (a2ui-card.js), and sends a card's button clicks back as a
 * userAction turn. A card that did not validate is refused here, never handed to the renderer.
 * The conversation lives here (Chat Completions is stateless); each assistant message carries
 * back the `adapter` that produced it.
 */
import { renderCard } from "./a2ui-card.js";
import { renderMarkdownInto } from "./markdown.js";

{

  const $ = (id) => document.getElementById(id);
  const log = $("log"), input = $("input"), select = $("adapter"), keyBox = $("apikey");
  const sendBtn = $("send"), stopBtn = $("stop"), toolsBox = $("tools");
  const state = { messages: [], cards: new Map(), publicName: "macaronic", busy: false, abort: null };

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
        if (info.kind === "routed") { state.publicName = m.id; $("pair").textContent = "pair " + info.pair_id.slice(0, 12); }
        if (info.kind !== "adapter") continue;
        const opt = document.createElement("option");
        opt.value = m.id;
        opt.textContent = `${m.id} (${info.role || "no role"}, ${info.mode})`;
        select.appendChild(opt);
      }
    } catch (e) {
      $("pair").textContent = "models: " + e.message;
    }
  }

  function bubble(cls, text) {
    const div = document.createElement("div");
    div.className = "msg " + cls;
    const span = document.createElement("div");
    span.className = "text";
    span.textContent = text || "";
    div.appendChild(span);
    log.appendChild(div);
    log.scrollTop = log.scrollHeight;
    return div;
  }

  function badge(div, meta) {
    const b = document.createElement("div");
    b.className = "badge";
    b.dataset.adapter = meta.adapter || "";
    const who = document.createElement("b");
    who.textContent = meta.specialist || meta.adapter || "base";
    b.appendChild(who);
    const conf = meta.confidence == null ? "" : ` ${(100 * meta.confidence).toFixed(0)}%`;
    const bits = [` · ${meta.adapter || "base"} (${meta.mode})`, ` · ${meta.policy}${conf}`,
      ` · route ${Number(meta.route_ms || 0).toFixed(0)} ms`,
      ` · prefill ${meta.prefill_tokens} · reused ${meta.reused_tokens} tokens`];
    b.appendChild(document.createTextNode(bits.join("")));
    div.appendChild(b);
  }

  // A GenUI reply: its text_response as the text, its card drawn only if the server validated it.
  // Surfaces live for the whole conversation, as in A2UI: updates without a beginRendering for a
  // surface an earlier reply drew (a dataModelUpdate, a deleteSurface) go to that card; a surface
  // rendered anew (beginRendering) gets a card in this reply, and the old one stays as it was.
  function card(div, genui) {
    if (!genui) return;
    if (!genui.valid) { // its text_response if it has one, else the raw reply stays as streamed
      if (genui.text_response) renderMarkdownInto(div.querySelector(".text"), genui.text_response);
      const warn = document.createElement("div");
      warn.className = "refused";
      warn.textContent = "card refused (did not validate): " + (genui.errors || []).map((x) => x.message).join("; ");
      div.appendChild(warn);
      return;
    }
    renderMarkdownInto(div.querySelector(".text"), genui.text_response || ""); // the card replaces the raw JSON
    if (genui.closed && genui.closed.length) {
      const note = document.createElement("div");
      note.className = "closed-note";
      note.textContent = `card closed by the harness (${genui.closed.length} fix${genui.closed.length > 1 ? "es" : ""})`;
      note.title = genui.closed.join(", ");
      div.appendChild(note);
    }
    const messages = Array.isArray(genui.a2ui) ? genui.a2ui : [];
    const sidOf = (m) => Object.values(m || {})[0]?.surfaceId;
    const redrawn = new Set(messages.filter((m) => m && m.beginRendering).map(sidOf));
    const fresh = [];
    let updated = 0;
    for (const m of messages) {
      const sid = sidOf(m), old = state.cards.get(sid);
      if (!old || redrawn.has(sid)) { fresh.push(m); continue; }
      try { old.process([m]); updated++; } catch (e) { div.appendChild(document.createTextNode("card error: " + e.message)); }
      if (m.deleteSurface) state.cards.delete(sid);
    }
    if (updated && !fresh.length) {
      const note = document.createElement("div");
      note.className = "closed-note";
      note.textContent = "updated a card above";
      div.appendChild(note);
    }
    if (!fresh.length) return;
    const box = document.createElement("div");
    box.className = "card";
    div.appendChild(box);
    try {
      const handle = renderCard(box, fresh, { onAction: (message) => send(message) });
      for (const m of fresh) {
        const sid = Object.values(m || {})[0]?.surfaceId;
        if (m.deleteSurface) state.cards.delete(sid); else state.cards.set(sid, handle);
      }
    } catch (e) {
      box.textContent = "card error: " + e.message;
    }
  }

  // Tool calls as collapsible blocks: the name in the summary, the arguments (pretty JSON) inside.
  function toolCalls(div, calls) {
    for (const c of calls) {
      const box = document.createElement("details");
      box.className = "tool-call";
      const head = document.createElement("summary");
      head.textContent = "tool call · " + c.function.name;
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

  function setBusy(busy) {
    state.busy = busy;
    sendBtn.disabled = busy;
    stopBtn.disabled = !busy;
  }

  // `what` is a string (typed message) or an A2UI {userAction} from a card's button.
  async function send(what) {
    if (state.busy) return;
    let tools = null;
    if (toolsBox.value.trim()) {
      try { tools = JSON.parse(toolsBox.value); } catch (e) { bubble("assistant error", "tools: not JSON: " + e.message); return; }
    }
    const isAction = typeof what !== "string";
    const content = isAction ? JSON.stringify(what) : what;
    state.messages.push({ role: "user", content });
    const u = bubble("user" + (isAction ? " action" : ""),
      isAction ? `▶ ${what.userAction.name} ${JSON.stringify(what.userAction.context || {})}` : what);
    u.dataset.role = "user";
    const div = bubble("assistant");
    const textEl = div.querySelector(".text");
    setBusy(true);
    state.abort = new AbortController();
    let text = "", meta = null, frame = 0;
    const calls = [];
    const paint = () => { frame = 0; renderMarkdownInto(textEl, text); log.scrollTop = log.scrollHeight; };
    try {
      const r = await fetch("/v1/chat/completions", {
        method: "POST", headers: headers(), signal: state.abort.signal,
        body: JSON.stringify({ model: select.value || state.publicName, messages: state.messages, stream: true,
          stream_options: { include_usage: true }, ...(tools ? { tools } : {}) }),
      });
      if (!r.ok) throw new Error((await r.json()).error.message);
      for await (const chunk of sse(r)) {
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.macaronic) meta = chunk.macaronic;
        for (const choice of chunk.choices || []) {
          const delta = choice.delta || {};
          if (delta.content) { text += delta.content; frame = frame || requestAnimationFrame(paint); }
          if (delta.tool_calls) mergeCalls(calls, delta.tool_calls);
        }
      }
      if (frame) cancelAnimationFrame(frame);
      paint();
      if (calls.length) toolCalls(div, calls);
      const reply = { role: "assistant", content: text || null };
      if (calls.length) reply.tool_calls = calls;
      if (meta) { reply.adapter = meta.adapter; card(div, meta.genui); badge(div, meta); }
      state.messages.push(reply);
    } catch (e) {
      div.classList.add("error");
      textEl.textContent = (text ? text + "\n" : "") + (e.name === "AbortError" ? "[stopped]" : "error: " + e.message);
      if (e.name === "AbortError" && text) state.messages.push({ role: "assistant", content: text });
      else state.messages.pop();
    } finally {
      setBusy(false);
      state.abort = null;
      input.focus();
    }
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
  $("clear").addEventListener("click", () => { state.messages = []; state.cards.clear(); log.textContent = ""; });

  window.MacaronicChat = { state, send };
  loadModels();
}
