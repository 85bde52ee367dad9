/// <reference types="node" />
// Bun entry: `npm run start:bun`. The same libSQL file or server as on Node; Bun loads libSQL's native module.
// File access goes through node:fs, which Bun implements natively and documents for mkdir and chmod.
import { nodeFilesAndOutput } from "./node-files.ts";
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
  ...nodeFilesAndOutput,
  resolveHost: async (hostname) => (await Bun.dns.lookup(hostname, { backend: "getaddrinfo" })).map((entry) => entry.address),
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
