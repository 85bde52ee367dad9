/// <reference types="node" />
// The file, output and exit parts of `ServerHost` over node: APIs, shared by the Node and Bun entries (Bun
// implements node:fs and process natively).
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { ServerHost } from "./start.ts";

export const nodeFilesAndOutput: Pick<ServerHost, "resolvePath" | "ensureParentDirectory" | "readTextFile" | "writePrivateFile" | "printLine" | "printErrorLine" | "exit"> = {
  resolvePath: (path) => resolve(path),
  ensureParentDirectory: async (file) => void (await mkdir(dirname(file), { recursive: true })),
  readTextFile: async (file) => {
    try {
      return await readFile(file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
  },
  writePrivateFile: async (file, text) => {
    await writeFile(file, text, { mode: 0o600 });
    // `mode` only applies when the file is created; a pre-existing file keeps its old bits otherwise.
    await chmod(file, 0o600);
  },
  printLine: (line) => void process.stdout.write(`${line}\n`),
  printErrorLine: (line) => void process.stderr.write(`${line}\n`),
  exit: (code) => process.exit(code),
};
