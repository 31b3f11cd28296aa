/*
 * settings.js: the sampling settings (temperature, max tokens, system prompt), the A2UI version
 * cards come in (the request's `a2ui_version`: "0.8", the server's default, or "0.9") and the colour
 * theme, kept in localStorage. `requestOptions()` is what each request adds; the system prompt goes
 * first in its messages. The theme follows prefers-color-scheme until the user picks one with the
 * toggle (data-theme on <html>, read by chat.css). Knows nothing of the conversation.
 */
const KEY = "macaronic-settings", THEME = "macaronic-theme";

export function initSettings({ temperature, maxTokens, system, a2uiVersion }) {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(KEY) || "{}") || {}; } catch (e) { /* unreadable: defaults */ }
  temperature.value = saved.temperature ?? "";
  maxTokens.value = saved.max_tokens ?? "";
  system.value = saved.system ?? "";
  a2uiVersion.value = saved.a2ui_version === "0.9" ? "0.9" : "0.8";
  const store = () => localStorage.setItem(KEY, JSON.stringify({
    temperature: temperature.value, max_tokens: maxTokens.value, system: system.value, a2ui_version: a2uiVersion.value }));
  for (const el of [temperature, maxTokens, system, a2uiVersion]) {
    el.addEventListener("input", store);
    el.addEventListener("change", store);
  }
  return {
    /** Extra request fields ({temperature, max_tokens, a2ui_version}) for the values set. */
    requestOptions() {
      const out = a2uiVersion.value === "0.9" ? { a2ui_version: "0.9" } : {};
      const t = parseFloat(temperature.value), n = parseInt(maxTokens.value, 10);
      if (Number.isFinite(t)) out.temperature = Math.min(2, Math.max(0, t));
      if (Number.isFinite(n) && n > 0) out.max_tokens = n;
      return out;
    },
    /** The system message to lead with, or null. */
    systemMessage() {
      const s = system.value.trim();
      return s ? { role: "system", content: s } : null;
    },
  };
}

export function initTheme(button) {
  const root = document.documentElement;
  const apply = (theme) => { if (theme) root.dataset.theme = theme; else delete root.dataset.theme; };
  apply(localStorage.getItem(THEME));
  button.addEventListener("click", () => {
    const dark = root.dataset.theme ? root.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    const next = dark ? "light" : "dark";
    localStorage.setItem(THEME, next);
    apply(next);
  });
}
