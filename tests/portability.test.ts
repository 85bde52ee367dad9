/// <reference types="node" />
import { spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

describe("portability rule", () => {
  it("src/ outside src/entry/ uses no Node built-ins, process or Buffer", () => {
    const result = spawnSync(process.execPath, ["scripts/check-portability.mjs"], { encoding: "utf8" });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  it("the check catches a node: import outside src/entry/", () => {
    const directory = mkdtempSync(join(tmpdir(), "hermes-portability-"));
    mkdirSync(join(directory, "scripts"));
    mkdirSync(join(directory, "src", "agent"), { recursive: true });
    cpSync("scripts/check-portability.mjs", join(directory, "scripts", "check-portability.mjs"));
    writeFileSync(join(directory, "src", "agent", "bad.ts"), 'import { readFileSync } from "node:fs";\n');
    const result = spawnSync(process.execPath, [join(directory, "scripts", "check-portability.mjs")], { encoding: "utf8" });
    rmSync(directory, { recursive: true, force: true });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("src/agent/bad.ts:1: imports a node: module");
  });
});
