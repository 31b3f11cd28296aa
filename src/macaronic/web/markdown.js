/*
 * markdown.js: chat and coding replies as safe HTML. markdown-it (raw HTML in the source is
 * escaped, not passed through) renders headings, lists, emphasis, links and fenced code
 * (`<pre><code class="language-x">`, text escaped, no highlighter); DOMPurify then removes
 * anything executable that could still slip in (javascript: links, event attributes). Links
 * open in a new tab without an opener. Both libraries come from npm in vendor/a2ui-lit.js, the
 * same copies the A2UI renderer uses for Text. Knows nothing about the chat's state.
 *
 * The page loads nothing from other hosts (the server's CSP forbids it, and a blocked load is a
 * console error): an image whose URL is outside this server is shown as its alt text, and the
 * sanitiser (shared with the A2UI Text renderer) strips any outside source that is left.
 */
import { markdownit, DOMPurify } from "./vendor/a2ui-lit.js";

const md = markdownit({ html: false, linkify: true, breaks: true });

/** True for a URL the page may load: its own server (relative or same origin) or a data: image. */
export function isLocalUrl(url) {
  const s = String(url ?? "").trim();
  if (/^data:image\//i.test(s)) return true;
  try { return new URL(s, location.href).origin === location.origin; } catch (e) { return false; }
}

const image = md.renderer.rules.image;
md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const src = tokens[idx].attrGet("src");
  if (isLocalUrl(src)) return image(tokens, idx, options, env, self);
  const alt = md.utils.escapeHtml(self.renderInlineAsText(tokens[idx].children, options, env));
  return `<span class="blocked-image" title="not loaded (outside this server): ${md.utils.escapeHtml(src)}">` +
    `[image${alt ? ": " + alt : ""}]</span>`;
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
  node.removeAttribute("srcset");
  for (const attr of ["src", "poster", "background"]) {
    if (node.hasAttribute(attr) && !isLocalUrl(node.getAttribute(attr))) node.removeAttribute(attr);
  }
});

/** Sanitised HTML for a markdown string. */
export function markdownToHtml(text) {
  return DOMPurify.sanitize(md.render(String(text || "")), { ADD_ATTR: ["target"] });
}

/** Replace `el`'s content with `text` rendered as markdown. */
export function renderMarkdownInto(el, text) {
  el.innerHTML = markdownToHtml(text);
  el.classList.add("md");
}
