/// <reference types="node" />
// Starts the real server of one runtime as a child process on a free loopback port, waits for /health, and
// stops it (with every process it spawned: wrangler runs workerd beneath it) when the suite is done.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../support/sqld.ts";

export type RuntimeUnderTest = "node" | "bun" | "deno" | "workerd";

export interface RunningServer {
  url: string;
  /** Everything the server printed so far (stdout and stderr), for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

const root = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Deno's permissions for src/entry/deno.ts. libSQL's native loader (@neon-rs/load) calls
 * process.report.getReport() to tell glibc from musl, which reads the CPU list, the network interfaces and
 * the host name; --allow-ffi loads the Node-API module itself.
 */
export const denoFlags = ["--allow-net", "--allow-env", "--allow-read", "--allow-write", "--allow-ffi", "--allow-sys=cpus,hostname,networkInterfaces"];

function localBinary(name: string): string {
  const path = join(root, "node_modules", ".bin", name);
  if (!existsSync(path)) throw new Error(`${name} is not installed at ${path}: run \`npm ci\` (it is a devDependency)`);
  return path;
}

/** The .dev.vars/.env syntax wrangler reads: single quotes keep JSON's double quotes and backslashes as they are. */
function envFileText(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([name, value]) => {
      if (value.includes("'") || value.includes("\n")) throw new Error(`${name}: a single quote or newline cannot be written to an env file`);
      return `${name}='${value}'\n`;
    })
    .join("");
}

interface Launch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

async function launch(runtime: RuntimeUnderTest, port: number, env: Record<string, string>, workDir: string): Promise<Launch> {
  // A clean environment: nothing of the developer's shell (a real OPENAI_API_KEY, a LIBSQL_URL) reaches the server.
  const base = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? workDir, NO_COLOR: "1" };
  const served = { ...env, PORT: String(port), HOST: "127.0.0.1" };
  switch (runtime) {
    case "node":
      return { command: process.execPath, args: ["--import", "tsx", join(root, "src/entry/node.ts")], env: { ...base, ...served } };
    case "bun":
      return { command: localBinary("bun"), args: [join(root, "src/entry/bun.ts")], env: { ...base, ...served } };
    case "deno":
      return {
        command: localBinary("deno"),
        args: ["run", ...denoFlags, join(root, "src/entry/deno.ts")],
        env: { ...base, DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1", ...served },
      };
    case "workerd": {
      // Workers get their variables from bindings, not the process environment: an env file in the temp dir.
      const envFile = join(workDir, "worker.env");
      writeFileSync(envFile, envFileText(env), { mode: 0o600 });
      return {
        command: process.execPath,
        args: [
          join(root, "node_modules/wrangler/bin/wrangler.js"),
          "dev",
          "--local",
          "--config",
          join(root, "wrangler.toml"),
          "--ip",
          "127.0.0.1",
          "--port",
          String(port),
          // wrangler's default 9229 would collide between parallel runs and with a developer's debugger.
          "--inspector-port",
          String(await freePort()),
          "--env-file",
          envFile,
          "--persist-to",
          join(workDir, "wrangler-state"),
          "--show-interactive-dev-session=false",
        ],
        env: {
          ...base,
          WRANGLER_SEND_METRICS: "false",
          CLOUDFLARE_CF_FETCH_ENABLED: "false",
          // Keeps wrangler's log files and user config out of the developer's home directory.
          WRANGLER_LOG_PATH: join(workDir, "wrangler-logs"),
          XDG_CONFIG_HOME: join(workDir, "config"),
        },
      };
    }
  }
}

async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.pid === undefined) return;
  const group = -child.pid;
  const signal = (name: NodeJS.Signals) => {
    try {
      // The child leads its own process group (detached), so this reaches workerd under wrangler too.
      process.kill(group, name);
    } catch {
      // the whole group is gone already
    }
  };
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    signal("SIGTERM");
    await Promise.race([exited, new Promise<void>((done) => setTimeout(done, 5000))]);
  }
  // Whatever is left of the group (workerd may outlive wrangler) goes now, also after an early exit.
  signal("SIGKILL");
}

export interface StartOptions {
  /** The /health status that means "up"; a server started without a usable store answers 503. Default 200. */
  readyStatus?: number;
  startTimeoutMs?: number;
}

/** Starts the server and resolves once GET /health answers `readyStatus`; rejects with the server's output otherwise. */
export async function startRuntimeServer(runtime: RuntimeUnderTest, env: Record<string, string>, workDir: string, options: StartOptions = {}): Promise<RunningServer> {
  const { readyStatus = 200, startTimeoutMs = 90_000 } = options;
  const port = await freePort();
  const { command, args, env: childEnv } = await launch(runtime, port, env, workDir);
  const child = spawn(command, args, { cwd: root, env: childEnv, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let output = "";
  const append = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000));
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  let spawnError: Error | null = null;
  child.once("error", (error) => (spawnError = error));

  const url = `http://127.0.0.1:${port}`;
  const server: RunningServer = { url, output: () => output, stop: () => stopGroup(child) };
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (spawnError) throw new Error(`${runtime}: could not start ${command}: ${String(spawnError)}`);
    if (child.exitCode !== null || child.signalCode !== null) {
      await server.stop();
      throw new Error(`${runtime}: the server exited (${child.exitCode ?? child.signalCode}) before answering /health:\n${output}`);
    }
    try {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
      if (response.status === readyStatus) return server;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`${runtime}: /health did not answer ${readyStatus} within ${startTimeoutMs} ms:\n${output}`);
    }
    await new Promise((done) => setTimeout(done, 100));
  }
}
