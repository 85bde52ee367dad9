// Bundles the Node entry into dist/node.mjs, so `npm start` runs plain JavaScript: Node 20 cannot run
// TypeScript itself, and transpiling at start-up (tsx) costs over a second of cold start.
// Packages stay external: they are already JavaScript, and libSQL's native module must load from node_modules.
import { build } from "esbuild";

await build({
  entryPoints: ["src/entry/node.ts"],
  outdir: "dist",
  entryNames: "[name]",
  outExtension: { ".js": ".mjs" },
  bundle: true,
  // Separate chunks keep the provider SDKs out of start-up: they load on the first call that needs them.
  splitting: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: true,
  logLevel: "warning",
});
