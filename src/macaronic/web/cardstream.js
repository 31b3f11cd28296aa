/*
 * cardstream.js: what a GenUI reply shows while it decodes. The genui specialist writes one JSON
 * object, {"text_response": "...", "a2ui": [A2UI messages]}, text_response first (its grammar
 * orders the keys). Until the final chunk says whether the card validated, the chat shows the
 * text_response decoded so far and a placeholder, never the raw JSON. Pure functions over the
 * streamed text; knows nothing of the page.
 */
const OPENERS = ['{"text_response"', '{"a2ui"'];
// A model that decodes without the grammar may fence its card (the server's repair takes it off).
const FENCE = /^\s*`{1,3}[A-Za-z]*/;

/** True while `text` can be (or is) the start of a card object, fenced or not. */
export function looksLikeCard(text) {
  const body = String(text || "");
  const head = body.replace(FENCE, "").replace(/\s+/g, "").slice(0, OPENERS[0].length);
  if (!head.length) return /^\s*`/.test(body); // an opening fence alone: wait and see
  return OPENERS.some((o) => o.startsWith(head) || head.startsWith(o));
}

/** The text_response decoded so far ("" before its first character), its escapes resolved;
 * an escape cut in the middle waits for its next chunk. */
export function partialTextResponse(text) {
  const m = /"text_response"\s*:\s*"/.exec(text);
  if (!m) return "";
  const start = m.index + m[0].length;
  let end = start;
  while (end < text.length && text[end] !== '"') {
    if (text[end] !== "\\") { end++; continue; }
    const step = text[end + 1] === "u" ? 6 : 2;
    if (end + step > text.length) break; // an escape cut by the chunk: leave it for the next one
    end += step;
  }
  try {
    return JSON.parse('"' + text.slice(start, end) + '"');
  } catch (e) {
    return "";
  }
}
