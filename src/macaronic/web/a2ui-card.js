/*
 * a2ui-card.js: draws A2UI v0.8 cards with the official renderer, @a2ui/lit's v0.8 export
 * (bundled from npm into vendor/a2ui-lit.js by scripts/build_web).
 *
 * Knows what the Lit components need from their host (a theme and a markdown renderer, provided
 * through @lit/context), keeps one message processor per card, and turns a Button's `a2uiaction`
 * event into a v0.8 client-to-server `userAction` (context bindings resolved against the
 * surface's data model, as macaronic.genui.actions.resolve_context does in Python). It does not
 * validate cards (the server does, and the chat draws only cards that passed) and does not talk
 * to the server: actions go to `onAction` and to an `a2ui-action` CustomEvent.
 *
 *   const card = renderCard(container, messages, {onAction: (msg) => send(msg)});
 *   card.process(more); card.dataModel("surface-id"); await card.ready;
 */
import { v0_8, UI, LitElement, html, ContextProvider, renderMarkdown } from "./vendor/a2ui-lit.js";
import { isLocalUrl } from "./markdown.js"; // also installs the sanitiser hook Text markdown goes through

const none = {};
const part = () => ({ container: none, element: none, label: none });
// Class maps name the renderer's own utility classes (web_core styles); sizes and colours that
// the chat wants beyond those go in additionalStyles, which the components apply inline.
const THEME = {
  components: {
    AudioPlayer: none, Button: { "layout-pt-2": true, "layout-pb-2": true, "layout-pl-4": true, "layout-pr-4": true,
      "border-br-4": true, "border-bw-0": true, "behavior-ho-80": true },
    Card: { "border-br-4": true, "layout-p-4": true }, Column: { "layout-g-2": true }, CheckBox: part(),
    DateTimeInput: part(), Divider: none,
    Image: { all: { "layout-w-100": true }, icon: none, avatar: none, smallFeature: none, mediumFeature: none,
      largeFeature: none, header: none },
    Icon: none, List: { "layout-g-2": true }, Modal: { backdrop: none, element: { "layout-p-4": true } },
    MultipleChoice: part(), Row: { "layout-g-2": true, "layout-al-c": true }, Slider: part(),
    Tabs: { container: none, element: none, controls: { all: none, selected: none } },
    Text: { all: { "layout-m-0": true }, h1: none, h2: none, h3: none, h4: none, h5: none, caption: none, body: none },
    TextField: part(), Video: none,
  },
  elements: Object.fromEntries(["a", "audio", "body", "button", "h1", "h2", "h3", "h4", "h5", "iframe", "input",
    "p", "pre", "textarea", "video"].map((k) => [k, none])),
  markdown: Object.fromEntries(["p", "h1", "h2", "h3", "h4", "h5", "ul", "ol", "li", "a", "strong", "em"]
    .map((k) => [k, ["p", "h1", "h2", "h3", "h4", "h5"].includes(k) ? ["layout-m-0"] : []])),
  additionalStyles: {
    Card: { background: "#fff", border: "1px solid #d0d4dc", "box-shadow": "0 1px 3px #0002" },
    Button: { background: "#3b5bdb", color: "#fff", cursor: "pointer", font: "inherit" },
    Image: { "max-width": "100%" },
  },
};

// The renderer's data model holds Maps (signal-backed); userAction context and tests want JSON.
function plain(value) {
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [k, plain(v)]));
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  return value;
}

// The renderer (web_core 0.11.0, A2uiMessageProcessor.resolvePropertyValue) reads ANY string
// property equal to a component id as a child reference: a Text with usageHint "body" in a card
// that also has a component "body" becomes a cycle and the whole card throws. The spec has no
// such rule and our validator accepts those cards (docs/BENCHMARKS.md), so the chat renames the
// colliding ids (only ids, only where they are referenced as children) before the renderer sees
// them, and reports the model's own ids back in userAction.
const REFERENCE_KEYS = new Set(["child", "entryPointChild", "contentChild"]);

function references(props, visit) { // calls visit(holder, key) for every child-reference slot
  for (const [key, value] of Object.entries(props || {})) {
    if (REFERENCE_KEYS.has(key) && typeof value === "string") visit(props, key);
    else if (key === "children" && value && typeof value === "object") {
      if (Array.isArray(value.explicitList)) value.explicitList.forEach((_, i) => visit(value.explicitList, i));
      if (value.template && typeof value.template.componentId === "string") visit(value.template, "componentId");
    } else if (key === "tabItems" && Array.isArray(value)) {
      for (const item of value) if (item && typeof item.child === "string") visit(item, "child");
    }
  }
}

function plainStrings(props, out) { // every string that is not a child reference or inside an action
  const refs = new Set();
  references(props, (holder, key) => refs.add(holder[key]));
  const walk = (v, key) => {
    if (key === "action") return;
    if (typeof v === "string") out.add(v);
    else if (Array.isArray(v)) v.forEach((x) => walk(x));
    else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) if (!(REFERENCE_KEYS.has(k))) walk(x, k);
  };
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "children" && value && typeof value === "object" && !Array.isArray(value)) continue;
    if (key === "tabItems" && Array.isArray(value)) value.forEach((it) => walk(it && it.title, "title"));
    else if (!REFERENCE_KEYS.has(key)) walk(value, key);
  }
}

/** A copy of `messages` in which no component id equals a plain string property of its surface.
 * `state` carries the renames across calls (a card streamed in several batches keeps its ids):
 * `state.to` maps `${surfaceId}\u0000${id}` to the renderer's id, `state.back` the reverse. */
export function disambiguate(messages, state = { to: new Map(), back: new Map() }) {
  const out = JSON.parse(JSON.stringify(messages));
  const ids = new Map(), strings = new Map(); // surfaceId -> Set
  for (const m of out) {
    const su = m && m.surfaceUpdate;
    if (!su || !Array.isArray(su.components)) continue;
    const sid = su.surfaceId;
    if (!ids.has(sid)) { ids.set(sid, new Set()); strings.set(sid, new Set()); }
    for (const c of su.components) {
      if (!c || typeof c !== "object") continue;
      ids.get(sid).add(c.id);
      for (const props of Object.values(c.component || {})) plainStrings(props, strings.get(sid));
    }
  }
  for (const [sid, set] of ids) {
    for (const id of set) {
      const key = `${sid}\u0000${id}`;
      if (typeof id !== "string" || state.to.has(key) || !strings.get(sid).has(id)) continue;
      let fresh = `${id}~id`;
      while (set.has(fresh) || strings.get(sid).has(fresh) || state.back.has(fresh)) fresh += "~";
      state.to.set(key, fresh);
      state.back.set(fresh, id);
    }
  }
  if (!state.to.size) return out;
  const fix = (sid) => (holder, key) => {
    const to = state.to.get(`${sid}\u0000${holder[key]}`);
    if (to) holder[key] = to;
  };
  for (const m of out) {
    if (m && m.surfaceUpdate && Array.isArray(m.surfaceUpdate.components)) {
      const sid = m.surfaceUpdate.surfaceId;
      for (const c of m.surfaceUpdate.components) {
        if (!c || typeof c !== "object") continue;
        fix(sid)(c, "id");
        for (const props of Object.values(c.component || {})) references(props, fix(sid));
      }
    }
    if (m && m.beginRendering) fix(m.beginRendering.surfaceId)(m.beginRendering, "root");
  }
  return out;
}

// The renderer also checks each surfaceUpdate message alone (web_core's zod schema): a child
// defined in a later surfaceUpdate of the same surface makes the whole card throw, while the spec
// and our validator let a surface's components arrive over several messages. Within one batch the
// chat merges a surface's surfaceUpdates into one (first position, last definition of an id wins).
export function mergeSurfaceUpdates(messages) {
  const merged = new Map(); // surfaceId -> the merged message
  const out = [];
  for (const m of messages) {
    const su = m && m.surfaceUpdate;
    if (!su || !Array.isArray(su.components)) { out.push(m); continue; }
    const into = merged.get(su.surfaceId);
    if (!into) {
      const copy = { surfaceUpdate: { ...su, components: [...su.components] } };
      merged.set(su.surfaceId, copy);
      out.push(copy);
      continue;
    }
    for (const c of su.components) {
      const at = into.surfaceUpdate.components.findIndex((x) => x && c && x.id === c.id);
      if (at >= 0) into.surfaceUpdate.components[at] = c; else into.surfaceUpdate.components.push(c);
    }
  }
  return out;
}

// A card loads nothing from other hosts (the page's CSP would block it, with a console error): a
// media component whose url is an outside literal becomes a caption saying so, and an outside url
// bound from the data model reads as missing (the renderer then shows "Invalid image URL").
const MEDIA = { Image: "image", Video: "video", AudioPlayer: "audio" };

function literalUrl(props) {
  const url = props && props.url;
  return url && typeof url === "object" ? url.literalString ?? url.literal : undefined;
}

/** A copy of `messages` in which no Image, Video or AudioPlayer names a URL outside this server. */
export function dropOutsideMedia(messages) {
  return messages.map((m) => {
    const su = m && m.surfaceUpdate;
    if (!su || !Array.isArray(su.components)) return m;
    const components = su.components.map((c) => {
      const [type, props] = Object.entries((c && c.component) || {})[0] || [];
      const url = MEDIA[type] ? literalUrl(props) : undefined;
      if (typeof url !== "string" || !url || isLocalUrl(url)) return c;
      return { ...c, component: { Text: { text: { literalString: `[${MEDIA[type]} not loaded: outside this server]` },
        usageHint: "caption" } } };
    });
    return { ...m, surfaceUpdate: { ...su, components } };
  });
}

class MacaronicCard extends LitElement {
  static properties = { processor: { attribute: false } };

  constructor() {
    super();
    this.processor = v0_8.Data.createSignalA2uiMessageProcessor();
    this.onAction = null;
    this.renames = { to: new Map(), back: new Map() }; // see disambiguate
    const getData = this.processor.getData.bind(this.processor); // see dropOutsideMedia
    this.processor.getData = (node, path, surfaceId) => {
      const value = getData(node, path, surfaceId);
      const bound = node && MEDIA[node.type] && node.properties?.url?.path === path;
      return bound && typeof value === "string" && !isLocalUrl(value) ? null : value;
    };
    new ContextProvider(this, { context: UI.Context.themeContext, initialValue: THEME });
    new ContextProvider(this, { context: UI.Context.markdown, initialValue: (text, options) => renderMarkdown(text, options) });
    this.addEventListener("a2uiaction", (event) => this.#action(event));
  }

  createRenderRoot() { return this; } // light DOM: the chat page's CSS and tests reach the surfaces

  render() {
    return html`${[...this.processor.getSurfaces()].map(([id, surface]) => html`<a2ui-surface
      data-surface-id=${id} .surfaceId=${id} .surface=${surface} .processor=${this.processor}></a2ui-surface>`)}`;
  }

  #action(event) {
    event.stopPropagation();
    const { action, sourceComponentId, sourceComponent } = event.detail;
    const surface = event.composedPath().find((n) => n.tagName === "A2UI-SURFACE");
    const surfaceId = surface ? surface.surfaceId : v0_8.A2uiMessageProcessor.DEFAULT_SURFACE_ID;
    const context = {};
    for (const item of action.context || []) {
      const value = item.value || {};
      if ("path" in value) {
        const found = this.processor.getData(sourceComponent, value.path, surfaceId);
        context[item.key] = found === undefined ? null : plain(found);
      } else {
        const key = ["literalString", "literalNumber", "literalBoolean"].find((k) => k in value);
        if (key) context[item.key] = value[key];
      }
    }
    const [base, ...suffix] = String(sourceComponentId || sourceComponent?.id || "").split(":");
    const source = [this.renames.back.get(base) || base, ...suffix].join(":");
    const message = { userAction: { name: action.name, surfaceId, sourceComponentId: source,
      timestamp: new Date().toISOString(), context } };
    this.dispatchEvent(new CustomEvent("a2ui-action", { detail: message, bubbles: true }));
    if (this.onAction) this.onAction(message);
  }
}
customElements.define("macaronic-a2ui", MacaronicCard);

/** Render `messages` (a v0.8 server-to-client list) into `container`; throws on a message the
 * processor rejects. `asIs: true` hands the messages over as they are (no merging of a surface's
 * surfaceUpdates, no id disambiguation; outside media are dropped all the same), to measure the
 * renderer alone. */
export function renderCard(container, messages, { onAction, asIs = false } = {}) {
  const el = document.createElement("macaronic-a2ui");
  el.onAction = onAction || null;
  const prepare = (list) => dropOutsideMedia(asIs ? list : disambiguate(mergeSurfaceUpdates(list), el.renames));
  el.processor.processMessages(prepare(messages));
  container.replaceChildren(el);
  return {
    element: el,
    get ready() { return el.updateComplete; },
    get size() { return el.processor.getSurfaces().size; },
    process(more) { el.processor.processMessages(prepare(more)); el.requestUpdate(); return el.updateComplete; },
    dataModel(surfaceId) {
      const surface = el.processor.getSurfaces().get(surfaceId);
      return surface ? plain(surface.dataModel) : null;
    },
  };
}
