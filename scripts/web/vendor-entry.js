// The libraries the web chat takes from npm, re-exported as one ES module
// (src/macaronic/web/vendor/a2ui-lit.js, built by scripts/build_web). No code of ours here:
// the glue that uses them is src/macaronic/web/a2ui-card.js, markdown.js and chat.js (highlighting).
export * as v0_8 from "@a2ui/lit/0.8";
export * as UI from "@a2ui/lit/ui";
export { LitElement, html, css, nothing } from "lit";
export { ContextProvider } from "@lit/context";
export { renderMarkdown } from "@a2ui/markdown-it";
export { default as markdownit } from "markdown-it";
export { default as DOMPurify } from "dompurify";
export { default as hljs } from "highlight.js/lib/common";
