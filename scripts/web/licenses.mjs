// Print the license text of every npm package that esbuild put into the bundle (read from its
// metafile) and of the packages named after it (files copied as they are, such as a font),
// sorted by name, so the committed LICENSES.txt is deterministic.
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";

const metas = process.argv.slice(2).filter((a) => a.endsWith(".json")); // the bundles' metafiles
const pkgs = new Set(process.argv.slice(2).filter((a) => !a.endsWith(".json")));
for (const file of metas) {
  for (const input of Object.keys(JSON.parse(readFileSync(file, "utf8")).inputs)) {
    const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
    if (m) pkgs.add(m[1]);
  }
}
for (const name of [...pkgs].sort()) {
  const dir = join("node_modules", name);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const file = readdirSync(dir).sort().find((f) => /^(licen[cs]e|copying)/i.test(f));
  process.stdout.write(`==== ${name} ${pkg.version} (${pkg.license || "see text"}) ====\n`);
  process.stdout.write(file && existsSync(join(dir, file)) ? readFileSync(join(dir, file), "utf8").trim() + "\n\n"
    : `no license file in the package; package.json says ${pkg.license}\n\n`);
}
