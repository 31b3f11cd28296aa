// Bundle the A2UI v0.9 renderer (scripts/web/vendor-entry-v09.js) into OUTDIR/a2ui-lit-v09.js and
// its metafile OUTDIR/meta-v09.json. The v0.8 and v0.9 renderers register custom elements of the
// same names (a2ui-surface, a2ui-card, a2ui-icon, ...) and a page can define a name once, so this
// build renames the v0.9 ones `a2ui09-*`, only where a name is registered (`customElement('...')`)
// or given as a catalog entry's tag (`tagName: '...'`). Same options as the v0.8 bundle.
//   node scripts/web/build-v09.mjs OUTDIR
import { build } from "esbuild";
import { readFile, writeFile } from "node:fs/promises";

const out = process.argv[2];
const V09 = /node_modules\/@a2ui\/(lit|web_core)\/src\/v0_9\/.*\.js$/;
const TAG = /(customElement\(|tagName:\s*)'a2ui-([a-z0-9-]+)'/g;
let renamed = 0;
const renameTags = {
  name: "a2ui09-tags",
  setup(b) {
    b.onLoad({ filter: V09 }, async (args) => {
      const text = await readFile(args.path, "utf8");
      return { contents: text.replace(TAG, (_, head, name) => { renamed++; return `${head}'a2ui09-${name}'`; }), loader: "js" };
    });
  },
};
const result = await build({
  entryPoints: ["scripts/web/vendor-entry-v09.js"], bundle: true, format: "esm", platform: "browser",
  target: "es2022", minify: true, legalComments: "none", charset: "utf8", logLevel: "warning",
  metafile: true, outfile: `${out}/a2ui-lit-v09.js`, plugins: [renameTags],
});
if (renamed < 19) throw new Error(`renamed ${renamed} v0.9 tag names; expected the surface and every basic component`);
await writeFile(`${out}/meta-v09.json`, JSON.stringify(result.metafile));
