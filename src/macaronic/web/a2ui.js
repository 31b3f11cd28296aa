/*
 * a2ui.js: a dependency-free browser renderer for A2UI v0.8 (standard catalog).
 *
 * Knows the four server-to-client messages (surfaceUpdate, dataModelUpdate, beginRendering,
 * deleteSurface), the 18 standard components, data binding (literal values or `path` into the
 * surface's data model, relative paths inside templates), templates (children generated from a
 * data-bound map or list), two-way binding for inputs, and Button actions, reported as v0.8
 * `userAction` messages. It does not validate (the server does: macaronic.genui.validate), fetch
 * anything, or talk to a server: actions go to `onAction` and to an `a2ui-action` CustomEvent.
 *
 * Usage:
 *   const r = A2UI.render(container, messages, {onAction: (msg) => send(msg)});
 *   r.process(moreMessages);       // streaming updates to the same surfaces
 *   r.dataModel("surface-id");     // the live data model (inputs write into it)
 *   container.addEventListener("a2ui-action", (e) => console.log(e.detail.userAction));
 *
 * The data-model rules mirror src/macaronic/genui/datamodel.py.
 */
(function (global) {
  "use strict";

  const MAX_DEPTH = 32;
  const ICONS = {
    accountCircle: "\u{1F464}", add: "+", arrowBack: "\u2190", arrowForward: "\u2192",
    attachFile: "\u{1F4CE}", calendarToday: "\u{1F4C5}", call: "\u{1F4DE}", camera: "\u{1F4F7}",
    check: "\u2713", close: "\u2715", delete: "\u{1F5D1}", download: "\u2B07", edit: "\u270E",
    event: "\u{1F4C6}", error: "\u26A0", favorite: "\u2665", favoriteOff: "\u2661",
    folder: "\u{1F4C1}", help: "?", home: "\u2302", info: "\u2139", locationOn: "\u{1F4CD}",
    lock: "\u{1F512}", lockOpen: "\u{1F513}", mail: "\u2709", menu: "\u2630", moreVert: "\u22EE",
    moreHoriz: "\u22EF", notificationsOff: "\u{1F515}", notifications: "\u{1F514}",
    payment: "\u{1F4B3}", person: "\u{1F464}", phone: "\u260E", photo: "\u{1F5BC}",
    print: "\u{1F5A8}", refresh: "\u21BB", search: "\u{1F50D}", send: "\u27A4",
    settings: "\u2699", share: "\u{1F517}", shoppingCart: "\u{1F6D2}", star: "\u2605",
    starHalf: "\u2BE8", starOff: "\u2606", upload: "\u2B06", visibility: "\u{1F441}",
    visibilityOff: "\u{1F648}", warning: "\u26A0",
  };
  const JUSTIFY = {
    start: "flex-start", center: "center", end: "flex-end", spaceBetween: "space-between",
    spaceAround: "space-around", spaceEvenly: "space-evenly",
  };
  const ALIGN = { start: "flex-start", center: "center", end: "flex-end", stretch: "stretch" };
  const CSS = `
.a2ui-surface{font-family:var(--a2ui-font,system-ui,sans-serif);color:#1b1b1f;--a2ui-primary:#3b5bdb}
.a2ui-row{display:flex;flex-direction:row;gap:8px}
.a2ui-column{display:flex;flex-direction:column;gap:8px}
.a2ui-list{display:flex;flex-direction:column;gap:6px;margin:0;padding:0;list-style:none}
.a2ui-list[data-direction=horizontal]{flex-direction:row}
.a2ui-card{border:1px solid #d0d4dc;border-radius:12px;padding:16px;background:#fff;box-shadow:0 1px 3px #0002}
.a2ui-text{margin:0}.a2ui-text[data-hint=caption]{font-size:12px;color:#5c6370}
.a2ui-button{border:1px solid var(--a2ui-primary);border-radius:8px;padding:6px 14px;background:#fff;color:var(--a2ui-primary);cursor:pointer;font:inherit}
.a2ui-button[data-primary=true]{background:var(--a2ui-primary);color:#fff}
.a2ui-image{max-width:100%;min-width:24px;min-height:24px;background:#e9ecf2;display:block}
.a2ui-image[data-hint=avatar]{width:48px;height:48px;border-radius:50%}
.a2ui-image[data-hint=icon]{width:24px;height:24px}
.a2ui-icon{display:inline-block;min-width:1.2em;text-align:center}
.a2ui-divider{border:0;border-top:1px solid #d0d4dc;margin:4px 0;align-self:stretch}
.a2ui-divider[data-axis=vertical]{border-top:0;border-left:1px solid #d0d4dc;margin:0 4px}
.a2ui-tabs-bar{display:flex;gap:4px;border-bottom:1px solid #d0d4dc}
.a2ui-tab[aria-selected=true]{border-bottom:2px solid var(--a2ui-primary);font-weight:600}
.a2ui-tab{background:none;border:0;padding:6px 10px;cursor:pointer;font:inherit}
.a2ui-field{display:flex;flex-direction:column;gap:2px;font-size:13px}
.a2ui-error{color:#c92a2a;font-size:12px}
dialog.a2ui-modal{border:1px solid #d0d4dc;border-radius:12px}`;

  // ---- data model (mirrors macaronic/genui/datamodel.py) ---------------------------------
  function splitPath(path) {
    return String(path).trim().split("/").filter((p) => p !== "")
      .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  }
  function escapeKey(key) { return String(key).replace(/~/g, "~0").replace(/\//g, "~1"); }
  function joinPath(base, path) {
    if (String(path).startsWith("/")) return path;
    return "/" + splitPath(base).concat(splitPath(path)).map(escapeKey).join("/");
  }
  function getPath(model, path) {
    let node = model;
    for (const part of splitPath(path)) {
      if (node !== null && typeof node === "object" && Object.prototype.hasOwnProperty.call(node, part)) {
        node = node[part];
      } else {
        return undefined;
      }
    }
    return node;
  }
  function setPath(model, path, value) {
    const parts = splitPath(path);
    if (parts.length === 0) return value !== null && typeof value === "object" ? value : { "": value };
    let node = model;
    for (const part of parts.slice(0, -1)) {
      if (node[part] === null || typeof node[part] !== "object") node[part] = {};
      node = node[part];
    }
    node[parts[parts.length - 1]] = value;
    return model;
  }
  function decodeString(value) {
    if (typeof value !== "string") return value;
    const head = value.trimStart().charAt(0);
    if (head === "[" || head === "{") {
      try { return JSON.parse(value); } catch (e) { /* plain text that starts with a bracket */ }
    }
    return value;
  }
  function entryValue(entry) {
    if ("valueString" in entry) return decodeString(entry.valueString);
    if ("valueNumber" in entry) return entry.valueNumber;
    if ("valueBoolean" in entry) return entry.valueBoolean;
    if ("valueMap" in entry) return decodeContents(entry.valueMap);
    return null;
  }
  function decodeContents(contents) {
    const out = {};
    for (const e of Array.isArray(contents) ? contents : []) if (e && typeof e.key === "string") out[e.key] = entryValue(e);
    return out;
  }
  function templateItems(value) {
    if (Array.isArray(value)) return value.map((v, i) => [String(i), v]);
    if (value !== null && typeof value === "object") return Object.entries(value);
    return [];
  }
  function display(value) {
    if (value === undefined || value === null) return "";
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function asList(v) { return Array.isArray(v) ? v : []; }

  function el(tag, cls, attrs) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) node.setAttribute(k, v);
    return node;
  }

  // ---- surfaces --------------------------------------------------------------------------
  class Surface {
    constructor(id) {
      this.id = id;
      this.components = new Map();
      this.model = {};
      this.root = null;
      this.styles = {};
      this.element = null;
      this.watchers = [];
    }
  }

  class Renderer {
    constructor(container, options) {
      this.container = container;
      this.onAction = (options && options.onAction) || null;
      this.maxDepth = (options && options.maxDepth) || MAX_DEPTH;
      this.surfaces = new Map();
      this.errors = [];
      installStyles(container.ownerDocument || document);
    }

    process(messages) {
      const touched = new Set();
      for (const message of Array.isArray(messages) ? messages : []) {
        // A malformed message is skipped and recorded; the server-side validator names the fault.
        try { this.apply(message, touched); } catch (e) { this.errors.push(String(e)); }
      }
      for (const surface of touched) if (surface.root !== null) this.renderSurface(surface);
      return this;
    }

    apply(message, touched) {
      const kind = Object.keys(message || {})[0];
      const body = (message && message[kind]) || {};
      const id = body.surfaceId;
      if (typeof id !== "string") throw new Error(`message without surfaceId: ${kind}`);
      if (kind === "deleteSurface") { this.deleteSurface(id); touched.delete(this.surfaces.get(id)); return; }
      const surface = this.surface(id);
      if (kind === "surfaceUpdate") for (const c of asList(body.components)) if (c && typeof c.id === "string") surface.components.set(c.id, c);
      if (kind === "dataModelUpdate") surface.model = setPath(surface.model, typeof body.path === "string" ? body.path : "/", decodeContents(body.contents));
      if (kind === "beginRendering") { surface.root = body.root; surface.styles = isObject(body.styles) ? body.styles : {}; }
      touched.add(surface);
    }

    surface(id) {
      if (!this.surfaces.has(id)) this.surfaces.set(id, new Surface(id));
      return this.surfaces.get(id);
    }

    deleteSurface(id) {
      const surface = this.surfaces.get(id);
      if (surface && surface.element) surface.element.remove();
      this.surfaces.delete(id);
    }

    dataModel(id) { const s = this.surfaces.get(id); return s ? s.model : undefined; }

    renderSurface(surface) {
      const root = el("div", "a2ui-surface", { "data-surface-id": surface.id });
      if (surface.styles.primaryColor) root.style.setProperty("--a2ui-primary", surface.styles.primaryColor);
      if (surface.styles.font) root.style.setProperty("--a2ui-font", surface.styles.font);
      surface.watchers = [];
      root.appendChild(this.node(surface, surface.root, "/", 0, []));
      if (surface.element) surface.element.replaceWith(root); else this.container.appendChild(root);
      surface.element = root;
    }

    node(surface, id, ctx, depth, stack) {
      const entry = typeof id === "string" ? surface.components.get(id) : undefined;
      if (!entry) return this.error(`unknown component ${id}`);
      if (stack.includes(id)) return this.error(`cycle at ${id}`);
      if (depth > this.maxDepth) return this.error("too deep");
      const type = Object.keys(isObject(entry.component) ? entry.component : {})[0];
      const render = COMPONENTS[type];
      if (!render) return this.error(`unknown component type ${type}`);
      const scope = { surface, id, ctx, depth, stack: stack.concat([id]), renderer: this };
      let node;
      try {
        node = render(isObject(entry.component[type]) ? entry.component[type] : {}, scope);
      } catch (e) {  // wrong-typed properties: show the fault in place, keep the rest of the card
        return this.error(`malformed ${type} ${id}`);
      }
      node.classList.add(`a2ui-${type.toLowerCase()}`);
      node.dataset.componentId = id;
      if (typeof entry.weight === "number") node.style.flexGrow = String(entry.weight);
      return node;
    }

    child(scope, id, ctx) {
      return this.node(scope.surface, id, ctx === undefined ? scope.ctx : ctx, scope.depth + 1, scope.stack);
    }

    children(scope, spec) {
      spec = spec || {};
      if (Array.isArray(spec.explicitList)) return spec.explicitList.map((id) => this.child(scope, id));
      const tpl = spec.template;
      if (!tpl) return [];
      const base = joinPath(scope.ctx, tpl.dataBinding);
      return templateItems(getPath(scope.surface.model, base))
        .map(([key]) => this.child(scope, tpl.componentId, joinPath(base, escapeKey(key))));
    }

    // A bound value: `path` wins when the model has it; a literal alongside a path initialises it.
    value(scope, bound) {
      if (!bound || typeof bound !== "object") return undefined;
      const literal = ["literalString", "literalNumber", "literalBoolean", "literalArray"]
        .map((k) => bound[k]).find((v) => v !== undefined);
      if (typeof bound.path !== "string") return literal;
      const abs = joinPath(scope.ctx, bound.path);
      let v = getPath(scope.surface.model, abs);
      if (v === undefined && literal !== undefined) {
        scope.surface.model = setPath(scope.surface.model, abs, literal);
        v = literal;
      }
      return v;
    }

    // Keep a display in sync with inputs that write the same path.
    bindText(scope, bound, node, apply) {
      apply(this.value(scope, bound));
      if (bound && typeof bound.path === "string") {
        const abs = joinPath(scope.ctx, bound.path);
        scope.surface.watchers.push({ path: abs, update: () => apply(getPath(scope.surface.model, abs)) });
      }
      return node;
    }

    write(scope, bound, value) {
      if (!bound || typeof bound.path !== "string") return;
      const abs = joinPath(scope.ctx, bound.path);
      scope.surface.model = setPath(scope.surface.model, abs, value);
      for (const w of scope.surface.watchers) if (w.path === abs || w.path.startsWith(abs + "/")) w.update();
    }

    action(scope, action) {
      const context = {};
      for (const item of action.context || []) {
        const v = item.value || {};
        if (typeof v.path === "string") context[item.key] = getPath(scope.surface.model, joinPath(scope.ctx, v.path)) ?? null;
        else if ("literalString" in v) context[item.key] = v.literalString;
        else if ("literalNumber" in v) context[item.key] = v.literalNumber;
        else if ("literalBoolean" in v) context[item.key] = v.literalBoolean;
      }
      const message = {
        userAction: {
          name: action.name, surfaceId: scope.surface.id, sourceComponentId: scope.id,
          timestamp: new Date().toISOString(), context,
        },
      };
      if (this.onAction) this.onAction(message);
      this.container.dispatchEvent(new CustomEvent("a2ui-action", { detail: message, bubbles: true }));
      return message;
    }

    error(text) { const n = el("span", "a2ui-error"); n.textContent = text; return n; }
  }

  function flex(tag, props, scope) {
    const node = el(tag);
    if (props.distribution) node.style.justifyContent = JUSTIFY[props.distribution] || "";
    if (props.alignment) node.style.alignItems = ALIGN[props.alignment] || "";
    for (const c of scope.renderer.children(scope, props.children)) node.appendChild(c);
    return node;
  }

  function field(scope, bound, input) {
    const wrap = el("label", "a2ui-field");
    const caption = el("span");
    scope.renderer.bindText(scope, bound, caption, (v) => { caption.textContent = display(v); });
    wrap.appendChild(caption);
    wrap.appendChild(input);
    return wrap;
  }

  const COMPONENTS = {
    Text(p, s) {
      const hint = p.usageHint || "body";
      const tag = /^h[1-5]$/.test(hint) ? hint : hint === "caption" ? "small" : "p";
      const node = el(tag, "a2ui-text", { "data-hint": hint });
      return s.renderer.bindText(s, p.text, node, (v) => { node.textContent = display(v); });
    },
    Image(p, s) {
      const node = el("img", "a2ui-image", { "data-hint": p.usageHint, alt: "" });
      if (p.fit) node.style.objectFit = p.fit;
      s.renderer.bindText(s, p.altText, node, (v) => { node.alt = display(v); });
      return s.renderer.bindText(s, p.url, node, (v) => { node.src = display(v); });
    },
    Icon(p, s) {
      const node = el("span", "a2ui-icon", { role: "img" });
      return s.renderer.bindText(s, p.name, node, (v) => {
        node.dataset.icon = display(v);
        node.setAttribute("aria-label", display(v));
        node.textContent = ICONS[v] || display(v);
      });
    },
    Video(p, s) {
      const node = el("video", "a2ui-video", { controls: "" });
      return s.renderer.bindText(s, p.url, node, (v) => { node.src = display(v); });
    },
    AudioPlayer(p, s) {
      const wrap = el("figure", "a2ui-audioplayer");
      const audio = el("audio", "", { controls: "" });
      const caption = el("figcaption");
      s.renderer.bindText(s, p.url, audio, (v) => { audio.src = display(v); });
      s.renderer.bindText(s, p.description, caption, (v) => { caption.textContent = display(v); });
      wrap.append(caption, audio);
      return wrap;
    },
    Row(p, s) { return flex("div", p, s); },
    Column(p, s) { return flex("div", p, s); },
    List(p, s) {
      const node = el("ul", "", { "data-direction": p.direction || "vertical" });
      if (p.alignment) node.style.alignItems = ALIGN[p.alignment] || "";
      for (const c of s.renderer.children(s, p.children)) { const li = el("li"); li.appendChild(c); node.appendChild(li); }
      return node;
    },
    Card(p, s) { const node = el("div"); node.appendChild(s.renderer.child(s, p.child)); return node; },
    Tabs(p, s) {
      const node = el("div");
      const bar = el("div", "a2ui-tabs-bar", { role: "tablist" });
      const panels = [];
      (p.tabItems || []).forEach((item, i) => {
        const tab = el("button", "a2ui-tab", { role: "tab", type: "button", "aria-selected": String(i === 0) });
        s.renderer.bindText(s, item.title, tab, (v) => { tab.textContent = display(v); });
        const panel = el("div", "a2ui-tab-panel", { role: "tabpanel" });
        panel.appendChild(s.renderer.child(s, item.child));
        panel.hidden = i !== 0;
        tab.addEventListener("click", () => {
          panels.forEach((x, j) => { x.hidden = j !== i; bar.children[j].setAttribute("aria-selected", String(j === i)); });
        });
        bar.appendChild(tab);
        panels.push(panel);
      });
      node.appendChild(bar);
      panels.forEach((x) => node.appendChild(x));
      return node;
    },
    Divider(p) { return el("hr", "", { "data-axis": p.axis || "horizontal" }); },
    Modal(p, s) {
      const node = el("div");
      const entry = s.renderer.child(s, p.entryPointChild);
      const dialog = el("dialog", "a2ui-modal");
      dialog.appendChild(s.renderer.child(s, p.contentChild));
      const close = el("button", "a2ui-modal-close", { type: "button", "aria-label": "close" });
      close.textContent = "\u2715";
      close.addEventListener("click", () => dialog.close());
      dialog.appendChild(close);
      entry.addEventListener("click", () => { if (!dialog.open) dialog.showModal(); });
      node.append(entry, dialog);
      return node;
    },
    Button(p, s) {
      const node = el("button", "", { type: "button", "data-primary": String(!!p.primary) });
      node.dataset.action = (p.action && p.action.name) || "";
      node.appendChild(s.renderer.child(s, p.child));
      node.addEventListener("click", () => { if (p.action) s.renderer.action(s, p.action); });
      return node;
    },
    CheckBox(p, s) {
      const input = el("input", "", { type: "checkbox" });
      input.checked = !!s.renderer.value(s, p.value);
      input.addEventListener("change", () => s.renderer.write(s, p.value, input.checked));
      const wrap = field(s, p.label, input);
      wrap.style.flexDirection = "row-reverse";
      wrap.style.justifyContent = "flex-end";
      return wrap;
    },
    TextField(p, s) {
      const kind = p.textFieldType || "shortText";
      const input = kind === "longText" ? el("textarea") : el("input", "", {
        type: { obscured: "password", number: "number", date: "date" }[kind] || "text",
        pattern: p.validationRegexp,
      });
      input.value = display(s.renderer.value(s, p.text));
      input.addEventListener("input", () => s.renderer.write(s, p.text, input.value));
      return field(s, p.label, input);
    },
    DateTimeInput(p, s) {
      const type = p.enableDate === false ? "time" : p.enableTime ? "datetime-local" : "date";
      const input = el("input", "", { type });
      input.value = display(s.renderer.value(s, p.value));
      input.addEventListener("change", () => s.renderer.write(s, p.value, input.value));
      const wrap = el("label", "a2ui-field");
      wrap.appendChild(input);
      return wrap;
    },
    MultipleChoice(p, s) {
      const node = el("fieldset", "", { "data-variant": p.variant || "checkbox" });
      const selected = () => { const v = s.renderer.value(s, p.selections); return Array.isArray(v) ? v.slice() : []; };
      for (const option of p.options || []) {
        const input = el("input", "", { type: "checkbox", value: option.value });
        input.checked = selected().includes(option.value);
        input.addEventListener("change", () => {
          let now = selected().filter((v) => v !== option.value);
          if (input.checked) now.push(option.value);
          if (p.maxAllowedSelections && now.length > p.maxAllowedSelections) { input.checked = false; return; }
          s.renderer.write(s, p.selections, now);
        });
        node.appendChild(field(s, option.label, input));
      }
      return node;
    },
    Slider(p, s) {
      const input = el("input", "", { type: "range", min: p.minValue ?? 0, max: p.maxValue ?? 100, step: "any" });
      input.value = display(s.renderer.value(s, p.value));
      input.addEventListener("input", () => s.renderer.write(s, p.value, Number(input.value)));
      return p.label ? field(s, p.label, input) : (() => { const w = el("div"); w.appendChild(input); return w; })();
    },
  };

  function installStyles(doc) {
    if (doc.getElementById("a2ui-styles")) return;
    const style = doc.createElement("style");
    style.id = "a2ui-styles";
    style.textContent = CSS;
    doc.head.appendChild(style);
  }

  function render(container, messages, options) {
    return new Renderer(container, options).process(messages);
  }

  global.A2UI = { render, Renderer, getPath, joinPath, setPath, decodeContents, COMPONENTS: Object.keys(COMPONENTS) };
})(typeof window !== "undefined" ? window : globalThis);
