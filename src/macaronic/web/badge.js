/*
 * badge.js: the line under a reply, in plain words ("Answered by the coding specialist · chosen in
 * 96 ms · 38 tok/s · 1.2 s"), with the technical details (how it was routed, confidence, prompt
 * tokens computed and reused, the harness's fixes to a card, the pair and response ids) one click
 * away in a <details>. Reads the final chunk's `macaronic` metadata and the speed the chat
 * measured; knows nothing of the conversation.
 */

// How the specialist was picked, in words (policies: serve/mol.py Route; anything else is a router).
const HOW = { forced: "you chose it", sticky: "kept for the tool result", "sticky-action": "kept for the card's button",
  tools: "picked for the tools sent", default: "the default", engine: "no routing" };

function who(meta) {
  return meta.specialist ? `the ${meta.specialist} specialist` : meta.adapter ? `the ${meta.adapter} adapter` : "the base model";
}

/** tokens per second of decoding, or null when too little was measured to say. */
export function tokensPerSecond(stats) {
  if (!stats || !stats.tokens || !(stats.decodeMs > 0)) return null;
  return stats.tokens / (stats.decodeMs / 1000);
}

/** The plain line: who answered, how they were chosen, speed, elapsed time. */
export function plainLine(meta, stats) {
  const bits = [`Answered by ${who(meta)}`];
  bits.push(HOW[meta.policy] || `chosen in ${Math.round(Number(meta.route_ms || 0))} ms`);
  const tps = tokensPerSecond(stats);
  if (tps != null) bits.push(`${tps >= 10 ? Math.round(tps) : tps.toFixed(1)} tok/s`);
  if (stats && stats.elapsedMs != null) bits.push(`${(stats.elapsedMs / 1000).toFixed(1)} s`);
  return bits.join(" · ");
}

function details(meta, stats, responseId) {
  const rows = [];
  rows.push(["Specialist", `${meta.specialist || "none (base model)"} · adapter ${meta.adapter || "none"}` +
    (meta.mode ? ` (${meta.mode} mode)` : "")]);
  const conf = meta.confidence == null ? "" : `, confidence ${(100 * meta.confidence).toFixed(0)}%`;
  rows.push(["Routing", `policy ${meta.policy}${conf}` + (meta.reason ? ` (${meta.reason})` : "") +
    `, ${Number(meta.route_ms || 0).toFixed(0)} ms`]);
  rows.push(["Prompt", `${meta.prefill_tokens ?? "?"} tokens computed, ${meta.reused_tokens ?? "?"} reused from the cache` +
    (meta.upper_tokens ? `, ${meta.upper_tokens} continued from the prefill the router read` : "") +
    (meta.ttft_ms != null ? `; first token after ${Math.round(meta.ttft_ms)} ms` : "")]);
  if (stats) {
    const tps = tokensPerSecond(stats);
    rows.push(["Reply", `${stats.tokens ?? "?"} tokens` + (stats.decodeMs != null ? ` in ${(stats.decodeMs / 1000).toFixed(2)} s` : "") +
      (tps != null ? ` (${tps.toFixed(1)} tok/s)` : "") + (stats.elapsedMs != null ? `; ${(stats.elapsedMs / 1000).toFixed(2)} s in all` : "")]);
  }
  const closed = meta.genui && meta.genui.closed;
  if (closed && closed.length) rows.push(["Card", `completed by the harness (${closed.length} fix${closed.length > 1 ? "es" : ""}: ${closed.join(", ")})`]);
  if (meta.constrained) rows.push(["Decoding", `constrained by the ${meta.constrained} grammar`]);
  if (meta.loop_cut) rows.push(["Loop", `a repeating loop of ${meta.loop_cut.period_tokens} tokens was cut`]);
  if (meta.tool_error) rows.push(["Tool call", String(meta.tool_error)]);
  rows.push(["Pair", meta.pair_id || "?"]);
  if (responseId) rows.push(["Response id", responseId]);
  const dl = document.createElement("dl");
  for (const [k, v] of rows) {
    const dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = k;
    dd.textContent = v;
    dl.append(dt, dd);
  }
  return dl;
}

/** The badge element for one reply. */
export function badge(meta, stats, responseId) {
  const b = document.createElement("div");
  b.className = "badge";
  b.dataset.adapter = meta.adapter || "";
  b.dataset.specialist = meta.specialist || "";
  const line = document.createElement("span");
  line.className = "plain";
  line.textContent = plainLine(meta, stats);
  const more = document.createElement("details");
  more.className = "tech";
  const summary = document.createElement("summary");
  summary.textContent = "details";
  more.append(summary, details(meta, stats, responseId));
  b.append(line, more);
  return b;
}
