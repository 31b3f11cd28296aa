/*
 * conversations.js: the chat's conversations, kept in the browser's localStorage (one key, a JSON
 * list), so a reload or a second tab finds them. A conversation is {id, title, created, updated,
 * entries}; an entry is one message as the chat drew it (see chat.js). Also turns entries into the
 * messages a request sends, and a conversation into a JSON download. Knows nothing of the page.
 */
const KEY = "macaronic-conversations";

/** Every stored conversation, most recently updated first. */
export function loadAll() {
  try {
    const list = JSON.parse(localStorage.getItem(KEY) || "[]");
    return Array.isArray(list) ? list.sort((a, b) => b.updated - a.updated) : [];
  } catch (e) {
    return [];
  }
}

function writeAll(list) { // false when the browser refuses (storage full or disabled)
  try {
    localStorage.setItem(KEY, JSON.stringify(list));
    return true;
  } catch (e) {
    return false;
  }
}

export function create() {
  const now = Date.now();
  return { id: "c" + now.toString(36) + Math.random().toString(36).slice(2, 8), title: "", created: now, updated: now,
    entries: [] };
}

/** Store `conv` (an empty one is not listed: it is stored once it has a message); false when the
 * browser would not keep it. */
export function save(conv) {
  const list = loadAll().filter((c) => c.id !== conv.id);
  if (!conv.entries.length) return writeAll(list);
  conv.updated = Date.now();
  if (!conv.title) {
    const first = conv.entries.find((e) => e.role === "user" && !e.label);
    conv.title = first ? first.content.replace(/\s+/g, " ").trim().slice(0, 48) : "Conversation";
  }
  return writeAll([conv, ...list]);
}

export function remove(id) {
  writeAll(loadAll().filter((c) => c.id !== id));
}

export function rename(id, title) {
  const list = loadAll();
  const c = list.find((x) => x.id === id);
  if (c && title.trim()) { c.title = title.trim(); writeAll(list); }
  return c;
}

/** The messages a Chat Completions request sends for these entries: a failed turn (an error and
 * the user message it answered) and a reply cut before it said anything are left out; each
 * assistant message carries back the adapter that produced it. */
export function history(entries) {
  const out = [];
  entries.forEach((e, i) => {
    if (e.error || e.omit) return;
    const next = entries[i + 1];
    if (e.role === "user" && next && next.error) return;
    const m = { role: e.role, content: e.content };
    if (e.role === "tool") m.tool_call_id = e.tool_call_id;
    if (e.tool_calls && e.tool_calls.length) m.tool_calls = e.tool_calls;
    if (e.adapter) m.adapter = e.adapter;
    out.push(m);
  });
  return out;
}

/** Offer `conv` as a JSON file download. */
export function download(conv) {
  const blob = new Blob([JSON.stringify(conv, null, 2)], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = `macaronic-${(conv.title || conv.id).replace(/[^\w.-]+/g, "-").slice(0, 40)}.json`;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
