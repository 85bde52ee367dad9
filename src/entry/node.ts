/// <reference types="node" />
// Node entry: `npm start`. Embedded libSQL file by default, no other setup.
import { serve } from "@hono/node-server";
import { lookup } from "node:dns/promises";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { listeningEntry, startServer } from "./start.ts";

const server = await startServer({
  runtimeName: "node",
  env: process.env,
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
  resolveHost: async (hostname) => (await lookup(hostname, { all: true })).map((entry) => entry.address),
  printLine: (line) => void process.stdout.write(`${line}\n`),
  printErrorLine: (line) => void process.stderr.write(`${line}\n`),
  exit: (code) => process.exit(code),
});

const listener = serve({ fetch: server.app.fetch, hostname: server.config.host, port: server.config.port }, (info) => {
  server.log(listeningEntry(server.config, info.port));
});
const stop = () => {
  listener.close();
  server.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
