// The official A2UI v0.9 renderer (@a2ui/lit's v0_9 export over @a2ui/web_core's v0_9 message
// processor and basic catalog), as its own ES module (src/macaronic/web/vendor/a2ui-lit-v09.js,
// built by scripts/web/build-v09.mjs). The page loads it only when it draws a v0.9 card; the glue
// that uses it is src/macaronic/web/a2ui-card-v09.js.
export { MessageProcessor } from "@a2ui/web_core/v0_9";
export { A2uiSurface, basicCatalog } from "@a2ui/lit/v0_9";
