/// <reference types="node" />
// Child processes and temp directories of a benchmark run. Everything started here is registered and
// torn down at the end of its phase, and again (SIGKILL, rm -rf) when the driver exits for any reason.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const children = new Set<ChildProcess>();
const directories = new Set<string>();

export function tempDirectory(label: string): string {
  const directory = mkdtempSync(join(tmpdir(), `hermes-bench-${label}-`));
  directories.add(directory);
  return directory;
}

/** Registers a directory made elsewhere (e.g. by tests/support) for removal at exit. */
export function adoptDirectory(directory: string): void {
  directories.add(directory);
}

export function removeDirectory(directory: string): void {
  rmSync(directory, { recursive: true, force: true });
  directories.delete(directory);
}

export function track<T extends ChildProcess>(child: T): T {
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopChild(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

function cleanupNow(): void {
  for (const child of children) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
}
process.on("exit", cleanupNow);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    cleanupNow();
    process.exit(130);
  });
}

/** One GET on a fresh connection; the status, or null when nothing answers yet. */
export function probe(url: string, timeoutMs = 1000): Promise<number | null> {
  return new Promise((done) => {
    const req = request(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on("end", () => done(res.statusCode ?? null));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => done(null));
    req.end();
  });
}

export interface ServerProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  /** Milliseconds from spawn to the first `/health` 200. */
  startMs: number;
  output(): string;
  /** JSON lines of bench/lib/server-preload.mjs (libSQL errors), in order. */
  traces(): string[];
  stop(): Promise<void>;
}

export interface ServerOptions {
  command: string;
  args: string[];
  env: Record<string, string>;
  port: number;
  timeoutMs?: number;
  pollMs?: number;
}

/** Spawns a server entry on 127.0.0.1:port and waits for `/health` to answer 200. */
export async function startServer(options: ServerOptions): Promise<ServerProcess> {
  const started = performance.now();
  const child = track(
    spawn(options.command, options.args, {
      cwd: resolve("."),
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...options.env, PORT: String(options.port), HOST: "127.0.0.1" },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let output = "";
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8000));
  // Lines written by bench/lib/server-preload.mjs, kept apart (bounded) so the rolling output cannot drop them.
  const traces: string[] = [];
  let partial = "";
  child.stdout?.on("data", keep);
  child.stderr?.on("data", (chunk: Buffer) => {
    keep(chunk);
    const lines = (partial + chunk.toString()).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) if (line.startsWith('{"bench_trace"') && traces.length < 10_000) traces.push(line);
  });
  const url = `http://127.0.0.1:${options.port}`;
  const deadline = started + (options.timeoutMs ?? 30_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${options.command} exited early:\n${output}`);
    if ((await probe(`${url}/health`)) === 200) break;
    if (performance.now() > deadline) {
      await stopChild(child, 0);
      throw new Error(`${options.command} did not answer /health in time:\n${output}`);
    }
    await new Promise((done) => setTimeout(done, options.pollMs ?? 10));
  }
  const startMs = performance.now() - started;
  return { url, pid: child.pid!, child, startMs, output: () => output, traces: () => traces, stop: () => stopChild(child) };
}

/** Spawns `node --import tsx <script> ...args` and resolves with the first stdout line parsed as JSON. */
export async function startJsonLineProcess(script: string, args: string[] = []): Promise<{ child: ChildProcess; line: Record<string, unknown> }> {
  const child = track(spawn(process.execPath, ["--import", "tsx", resolve(script), ...args], { stdio: ["ignore", "pipe", "pipe"] }));
  let errors = "";
  child.stderr?.on("data", (chunk: Buffer) => (errors = (errors + chunk.toString()).slice(-4000)));
  const line = await new Promise<Record<string, unknown>>((done, fail) => {
    let buffered = "";
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString();
      const end = buffered.indexOf("\n");
      if (end < 0) return;
      child.stdout?.off("data", onData);
      try {
        done(JSON.parse(buffered.slice(0, end)) as Record<string, unknown>);
      } catch (error) {
        fail(error);
      }
    };
    child.stdout?.on("data", onData);
    child.once("exit", (code) => fail(new Error(`${script} exited with ${code}: ${errors}`)));
  });
  child.stdout?.resume();
  return { child, line };
}

/** Resident set size of a process in KiB (VmRSS of /proc/<pid>/status). */
export function residentKiB(pid: number): number {
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!match) throw new Error(`no VmRSS for ${pid}`);
  return Number(match[1]);
}
