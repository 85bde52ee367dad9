// Portability rule (design.md): src/ outside src/entry/ uses Web-standard APIs only, so the same code runs
// on Node, Bun, Deno and workerd. This check fails on Node built-ins, `process` and `Buffer` there.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = new URL("../src/", import.meta.url).pathname;
const forbidden = [
  [/from\s+["']node:/, "imports a node: module"],
  [/import\(\s*["']node:/, "imports a node: module"],
  [/\bprocess\.(env|argv|exit|cwd|platform|nextTick)\b/, "uses process"],
  [/\bBuffer\.(from|alloc|concat|byteLength)\b/, "uses Buffer"],
  [/\brequire\(/, "uses require"],
];

function* files(directory) {
  for (const name of readdirSync(directory)) {
    const path = join(directory, name);
    if (statSync(path).isDirectory()) {
      if (relative(root, path) !== "entry") yield* files(path);
    } else if (path.endsWith(".ts")) yield path;
  }
}

const problems = [];
for (const file of files(root)) {
  const lines = readFileSync(file, "utf8").split("\n");
  lines.forEach((line, index) => {
    if (/^\s*(\/\/|\*)/.test(line)) return;
    for (const [pattern, message] of forbidden) if (pattern.test(line)) problems.push(`src/${relative(root, file)}:${index + 1}: ${message}`);
  });
}
if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log("portability: ok");
