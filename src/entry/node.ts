/// <reference types="node" />
// Node entry: `npm start`. Embedded libSQL file by default, no other setup.
import { serve } from "@hono/node-server";
import { lookup } from "node:dns/promises";
import { nodeFilesAndOutput } from "./node-files.ts";
import { listeningEntry, startServer } from "./start.ts";

const server = await startServer({
  runtimeName: "node",
  env: process.env,
  ...nodeFilesAndOutput,
  resolveHost: async (hostname) => (await lookup(hostname, { all: true })).map((entry) => entry.address),
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
