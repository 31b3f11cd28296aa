/*
 * a2ui-card-v09.js: draws A2UI v0.9 cards with the official renderer, @a2ui/lit's v0_9 surface over
 * @a2ui/web_core's v0_9 MessageProcessor and basic catalog (bundled into vendor/a2ui-lit-v09.js by
 * scripts/build_web, its elements renamed a2ui09-* so they live beside the v0.8 ones), loaded the
 * first time a v0.9 card is drawn. The v0.9 renderer binds inputs to the data model and resolves
 * an action's context itself; a Button's action comes back here and goes to `onAction` as the
 * `userAction` the genui specialist reads (the same fields: name, surfaceId, sourceComponentId,
 * timestamp, context). Like a2ui-card.js it does not validate cards (the server does) and draws no
 * media from another host.
 *
 *   const card = renderCardV09(container, messages, {onAction: (msg) => send(msg)});
 *   await card.ready; card.process(more); card.dataModel("surface-id"); card.size;
 */
import { isLocalUrl } from "./markdown.js";

let vendor = null;
const load = () => (vendor ||= import("./vendor/a2ui-lit-v09.js"));

const MEDIA = { Image: "image", Video: "video", AudioPlayer: "audio" };

/** A copy of `messages` in which no Image, Video or AudioPlayer names a URL outside this server
 * (a literal one becomes a caption saying so; a bound one is left to the data, checked below). */
export function dropOutsideMediaV09(messages) {
  return messages.map((m) => {
    const uc = m && m.updateComponents;
    if (!uc || !Array.isArray(uc.components)) return m;
    const components = uc.components.map((c) => {
      const url = c && MEDIA[c.component] ? c.url : undefined;
      if (typeof url !== "string" || !url || isLocalUrl(url)) return c;
      return { id: c.id, component: "Text", text: `[${MEDIA[c.component]} not loaded: outside this server]`, variant: "caption" };
    });
    return { ...m, updateComponents: { ...uc, components } };
  });
}

// A url bound from the data model is checked when the data arrives: an outside one is dropped.
function dropOutsideData(messages, boundUrls) {
  return messages.map((m) => {
    const ud = m && m.updateDataModel;
    if (!ud || !boundUrls.size) return m;
    const scrub = (value, path) => {
      if (typeof value === "string") return boundUrls.has(path) && !isLocalUrl(value) ? "" : value;
      if (Array.isArray(value)) return value.map((v, i) => scrub(v, `${path}/${i}`));
      if (value && typeof value === "object") {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrub(v, `${path}/${k}`)]));
      }
      return value;
    };
    const base = !ud.path || ud.path === "/" ? "" : ud.path.replace(/\/$/, "");
    return { ...m, updateDataModel: { ...ud, value: scrub(ud.value, base) } };
  });
}

function boundMediaPaths(messages, into) {
  for (const m of messages) {
    for (const c of (m && m.updateComponents && m.updateComponents.components) || []) {
      if (c && MEDIA[c.component] && c.url && typeof c.url.path === "string") into.add(c.url.path);
    }
  }
  return into;
}

/** Render `messages` (a v0.9 server-to-client list) into `container`. The renderer loads on first
 * use, so the card draws once it has: `ready` settles then (rejected if the processor refuses a
 * message), and `process` queues behind it. */
export function renderCardV09(container, messages, { onAction } = {}) {
  const host = document.createElement("div");
  host.className = "a2ui09";
  container.replaceChildren(host);
  const surfaces = new Map();
  const boundUrls = new Set();
  const draw = () => host.replaceChildren(...[...surfaces.values()].map((surface) => {
    const el = document.createElement("a2ui09-surface");
    el.dataset.surfaceId = surface.id;
    el.surface = surface;
    return el;
  }));
  const prepare = (list) => dropOutsideData(dropOutsideMediaV09(list), boundMediaPaths(list, boundUrls));
  let processor = null;
  let chain = load().then(({ MessageProcessor, basicCatalog }) => {
    processor = new MessageProcessor([basicCatalog], (action) => {
      const message = { userAction: action };
      host.dispatchEvent(new CustomEvent("a2ui-action", { detail: message, bubbles: true }));
      if (onAction) onAction(message);
    });
    processor.onSurfaceCreated((surface) => { surfaces.set(surface.id, surface); draw(); });
    processor.onSurfaceDeleted((id) => { surfaces.delete(id); draw(); });
    processor.processMessages(prepare(messages));
  });
  const ready = chain;
  return {
    element: host,
    ready,
    get size() { return surfaces.size; },
    process(more) { chain = chain.then(() => processor.processMessages(prepare(more))); return chain; },
    dataModel(surfaceId) {
      const surface = surfaces.get(surfaceId);
      return surface ? JSON.parse(JSON.stringify(surface.dataModel.get("/") ?? null)) : null;
    },
  };
}
