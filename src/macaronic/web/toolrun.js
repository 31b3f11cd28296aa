/*
 * toolrun.js: tools that run. With "Use my built-in tools" on, the page sends the server's
 * built-in tool schemas (GET /v1/tools: reminders, calendar, contacts, notes, orders) and runs each
 * call the agent makes on the server's own substrate (POST /v1/tools/execute); chat.js sends the
 * results back until the agent answers in text, at most MAX_STEPS rounds. A call nothing runs (a
 * tool typed into the Tools box) ends the turn with a note, and so does an agent that can only
 * pretend to act because tools are off. Knows nothing about streaming or the conversation list.
 */
export const MAX_STEPS = 5;
const KEY = "macaronic-builtin-tools";

export const OFF_NOTE = "tools are off: turn on built-in tools (Tools ▸ Use my built-in tools) to let the agent act";
export const stepsNote = (n) => `stopped after ${n} tool rounds: send a message to let the agent go on`;

export function unrunNote(calls) {
  const names = [...new Set(calls.map((c) => c.function.name))].join(", ");
  return `nothing on this page runs ${names}: only the built-in tools run here (Tools ▸ Use my built-in tools); ` +
    "a tool defined in the Tools box is shown, not executed";
}

// A reply that acts without tools: a specialist whose output is tool calls (the server's turn
// metadata says which), or tool-call markup written as text.
export function pretendsToAct(entry) {
  return (entry.meta && entry.meta.output === "tool_calls") || /<\/?tool(_call)?>/.test(entry.content || "");
}

export function initToggle(box) {
  box.checked = localStorage.getItem(KEY) === "1";
  box.addEventListener("change", () => localStorage.setItem(KEY, box.checked ? "1" : "0"));
}

async function errorOf(r) {
  try { return (await r.json()).error.message; } catch (e) { return `HTTP ${r.status}`; }
}

// The built-in tools' OpenAI schemas, fetched once per page (the list is fixed for a server), and
// the names of those that change something (the page asks before running them).
let listed = null;
let writing = new Set();
export async function builtinTools(headers) {
  if (!listed) {
    const r = await fetch("/v1/tools", { headers });
    if (!r.ok) throw new Error("built-in tools: " + await errorOf(r));
    const body = await r.json();
    listed = body.data;
    writing = new Set(body.writes || []);
  }
  return listed;
}
export const writes = (call) => writing.has(call.function.name);

// Ask before a call that changes something: a box naming the call and its arguments, Allow / Deny.
// Resolves true or false; `signal` (Stop) removes the box and resolves false.
export function confirmCall(call, signal) {
  const box = document.createElement("div");
  box.className = "msg confirm-call";
  const what = document.createElement("div");
  what.className = "confirm-what";
  let args = call.function.arguments || "{}";
  try { args = Object.entries(JSON.parse(args)).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(", "); } catch (e) { /* as sent */ }
  what.textContent = `The agent wants to run ${call.function.name}` + (args ? ` (${args})` : "") + ". This changes your data.";
  const allow = document.createElement("button");
  allow.type = "button"; allow.className = "allow"; allow.textContent = "Allow";
  const deny = document.createElement("button");
  deny.type = "button"; deny.className = "deny quiet"; deny.textContent = "Deny";
  box.append(what, allow, deny);
  const done = new Promise((resolve) => {
    const finish = (ok) => { box.remove(); resolve(ok); };
    allow.addEventListener("click", () => finish(true));
    deny.addEventListener("click", () => finish(false));
    if (signal) signal.addEventListener("abort", () => finish(false));
  });
  return { box, done };
}

// What the agent reads when the user said no: a refused result, so it can answer instead of acting.
export function declined(call) {
  return { role: "tool", tool_call_id: call.id, name: call.function.name, failed: true,
    content: JSON.stringify({ error: `the user declined: ${call.function.name} did not run` }) };
}

// Run one call on the server; the result (an {error} object when the substrate refused it) as
// the `tool` message that answers the call.
export async function execute(call, headers, signal) {
  const r = await fetch("/v1/tools/execute", {
    method: "POST", headers, signal,
    body: JSON.stringify({ name: call.function.name, arguments: call.function.arguments || "{}", call_id: call.id }),
  });
  if (!r.ok) throw new Error(`${call.function.name}: ` + await errorOf(r));
  const { result } = await r.json();
  return { role: "tool", tool_call_id: call.id, name: call.function.name, content: JSON.stringify(result),
    failed: "error" in result };
}

// A tool result as drawn: a collapsed block, the tool's name in the summary, the JSON inside.
export function drawResult(entry) {
  const div = document.createElement("div");
  div.className = "msg tool" + (entry.failed ? " failed" : "");
  div.dataset.role = "tool";
  const box = document.createElement("details");
  box.className = "tool-call tool-result";
  const head = document.createElement("summary");
  head.textContent = (entry.failed ? "tool refused · " : "tool result · ") + entry.name;
  const pre = document.createElement("pre");
  const code = document.createElement("code");
  let shown = entry.content;
  try { shown = JSON.stringify(JSON.parse(entry.content), null, 2); } catch (e) { /* shown as stored */ }
  code.textContent = shown;
  pre.appendChild(code);
  box.append(head, pre);
  div.appendChild(box);
  if (entry.note) {
    const n = document.createElement("div");
    n.className = "note tool-note";
    n.textContent = entry.note;
    div.appendChild(n);
  }
  return div;
}
