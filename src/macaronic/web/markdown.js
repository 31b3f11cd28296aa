/*
 * markdown.js: chat and coding replies as safe HTML. markdown-it (raw HTML in the source is
 * escaped, not passed through) renders headings, lists, emphasis, links and fenced code
 * (`<pre><code class="language-x">`, text escaped, no highlighter); DOMPurify then removes
 * anything executable that could still slip in (javascript: links, event attributes). Links
 * open in a new tab without an opener. Both libraries come from npm in vendor/a2ui-lit.js, the
 * same copies the A2UI renderer uses for Text. Knows nothing about the chat's state.
 */
import { markdownit, DOMPurify } from "./vendor/a2ui-lit.js";

const md = markdownit({ html: false, linkify: true, breaks: true });

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
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
