// `npm run size`: builds the Worker exactly as `wrangler deploy` would (minified, offline, nothing uploaded)
// and prints the bytes that count against Cloudflare's script size limit (measured gzip-compressed), with the
// packages that take the most of them. Exits non-zero when the build fails.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";

const root = resolve(new URL("..", import.meta.url).pathname);
const outdir = mkdtempSync(join(tmpdir(), "hermes-bundle-"));
const metafile = join(outdir, "meta.json");

function measure() {
  const build = spawnSync(
    process.execPath,
    [join(root, "node_modules/wrangler/bin/wrangler.js"), "deploy", "--dry-run", "--minify", "--outdir", outdir, "--metafile", metafile],
    {
      cwd: root,
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
      encoding: "utf8",
    },
  );
  if (build.status !== 0) {
    process.stderr.write(`${build.stdout ?? ""}${build.stderr ?? ""}`);
    console.error(`size: wrangler deploy --dry-run failed (exit ${build.status ?? build.signal})`);
    return 1;
  }
  const bundleName = readdirSync(outdir).find((name) => name.endsWith(".js"));
  if (!bundleName) {
    console.error(`size: the build wrote no .js file to ${outdir}`);
    return 1;
  }
  const bundle = readFileSync(join(outdir, bundleName));
  const gzip = gzipSync(bundle);
  const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
  console.log(`worker bundle (${bundleName}): minified ${bundle.length} bytes (${kib(bundle.length)}), gzip ${gzip.length} bytes (${kib(gzip.length)})`);

  // Where the minified bytes come from, by npm package (or "src" for this project's own code).
  const meta = JSON.parse(readFileSync(metafile, "utf8"));
  const output = Object.entries(meta.outputs).find(([path]) => path.endsWith(".js"))?.[1];
  const byPackage = new Map();
  for (const [path, { bytesInOutput }] of Object.entries(output?.inputs ?? {})) {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
    const name = match ? match[1] : path.startsWith("src/") ? "src" : "other";
    byPackage.set(name, (byPackage.get(name) ?? 0) + bytesInOutput);
  }
  const ranked = [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 10);
  console.log("largest contributors (minified bytes before gzip):");
  for (const [name, bytes] of ranked) console.log(`  ${name.padEnd(28)} ${String(bytes).padStart(8)}  ${((100 * bytes) / bundle.length).toFixed(1)}%`);
  return 0;
}

try {
  process.exitCode = measure();
} finally {
  rmSync(outdir, { recursive: true, force: true });
}
