/// <reference types="node" />
// Bun entry: `npm run start:bun`. The same libSQL file or server as on Node; Bun loads libSQL's native module.
// File access goes through node:fs, which Bun implements natively and documents for mkdir and chmod.
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { listeningEntry, startServer } from "./start.ts";

/**
 * The part of Bun's global this entry uses. Not bun-types: they retype the global `fetch` (adding `preconnect`)
 * for the whole program, which breaks every `typeof fetch` stand-in the tests pass to the app.
 */
declare const Bun: {
  env: Record<string, string | undefined>;
  serve(options: {
    port: number;
    hostname: string;
    idleTimeout: number;
    fetch: (request: Request) => Response | Promise<Response>;
  }): { port: number; stop(closeActiveConnections?: boolean): Promise<void> };
  dns: { lookup(hostname: string, options?: { backend?: "getaddrinfo" }): Promise<{ address: string }[]> };
};

const server = await startServer({
  runtimeName: "bun",
  env: Bun.env,
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
    await chmod(file, 0o600);
  },
  // getaddrinfo, like the connections fetch opens, so /etc/hosts entries are judged as they will be used.
  resolveHost: async (hostname) => (await Bun.dns.lookup(hostname, { backend: "getaddrinfo" })).map((entry) => entry.address),
  printLine: (line) => void process.stdout.write(`${line}\n`),
  printErrorLine: (line) => void process.stderr.write(`${line}\n`),
  exit: (code) => process.exit(code),
});

const listener = Bun.serve({
  port: server.config.port,
  hostname: server.config.host,
  // Bun closes a connection after 10 s without a byte by default; a non-streamed turn waits on the provider
  // far longer than that, so the connection may stay quiet up to Bun's maximum of 255 s.
  idleTimeout: 255,
  fetch: (request) => server.app.fetch(request),
});
server.log(listeningEntry(server.config, listener.port));

const stop = () => {
  void listener.stop(true).finally(() => {
    server.close();
    process.exit(0);
  });
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
