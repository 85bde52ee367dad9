/// <reference types="node" />
// Deno entry: `npm run start:deno`. Bare imports resolve from the npm-installed node_modules (deno.json,
// "nodeModulesDir": "manual"), so no registry is contacted at start. Flags: --allow-net (listen, providers,
// libSQL servers), --allow-env (config), --allow-read and --allow-write (the libSQL file, the API key file),
// --allow-ffi (libSQL's Node-API module, which `@libsql/client` loads even for server URLs), and
// --allow-sys=cpus,hostname,networkInterfaces (that module's loader tells glibc from musl through
// process.report.getReport(), which reads those three).
import { lookup } from "node:dns/promises";
import { listeningEntry, startServer } from "./start.ts";

/** The part of Deno's global this entry uses: Deno's type library ships inside its binary, not in node_modules. */
declare const Deno: {
  env: { toObject(): Record<string, string> };
  cwd(): string;
  mkdir(path: string, options: { recursive: boolean }): Promise<void>;
  readTextFile(path: string): Promise<string>;
  writeTextFile(path: string, data: string, options: { mode: number }): Promise<void>;
  chmod(path: string, mode: number): Promise<void>;
  errors: { NotFound: abstract new (...args: never[]) => Error };
  serve(
    options: { port: number; hostname: string; onListen(address: { port: number }): void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { shutdown(): Promise<void> };
  addSignalListener(signal: "SIGTERM" | "SIGINT", handler: () => void): void;
  exit(code: number): never;
};

const separator = /[\\/]/;

function resolvePath(path: string): string {
  if (path.startsWith("/") || /^[A-Za-z]:[\\/]/.test(path)) return path;
  const parts = `${Deno.cwd()}/${path}`.split(separator);
  const kept: string[] = [];
  for (const part of parts) {
    if (part === "..") kept.pop();
    else if (part !== "." && part !== "") kept.push(part);
  }
  return /^[A-Za-z]:$/.test(kept[0] ?? "") ? kept.join("/") : `/${kept.join("/")}`;
}

function parentDirectory(file: string): string {
  const index = Math.max(file.lastIndexOf("/"), file.lastIndexOf("\\"));
  return index > 0 ? file.slice(0, index) : file.slice(0, index + 1) || ".";
}

const server = await startServer({
  runtimeName: "deno",
  env: Deno.env.toObject(),
  resolvePath,
  ensureParentDirectory: (file) => Deno.mkdir(parentDirectory(file), { recursive: true }),
  readTextFile: async (file) => {
    try {
      return await Deno.readTextFile(file);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return null;
      throw error;
    }
  },
  writePrivateFile: async (file, text) => {
    await Deno.writeTextFile(file, text, { mode: 0o600 });
    await Deno.chmod(file, 0o600);
  },
  // getaddrinfo through node:dns, like the connections fetch opens; Deno.resolveDns skips /etc/hosts.
  resolveHost: async (hostname) => (await lookup(hostname, { all: true })).map((entry) => entry.address),
  printLine: (line) => console.log(line),
  printErrorLine: (line) => console.error(line),
  exit: (code) => Deno.exit(code),
});

const listener = Deno.serve({ port: server.config.port, hostname: server.config.host, onListen: ({ port }) => server.log(listeningEntry(server.config, port)) }, (request) =>
  server.app.fetch(request),
);

const stop = () => {
  void listener.shutdown().finally(() => {
    server.close();
    Deno.exit(0);
  });
};
Deno.addSignalListener("SIGTERM", stop);
Deno.addSignalListener("SIGINT", stop);
