/// <reference types="node" />
// A small keep-alive JSON client over node:http for the load driver: cheaper per request than fetch, so
// less of the driver's own cost lands in the measured turn latency.
import { Agent, request } from "node:http";

export interface Reply {
  status: number;
  body: any;
  /** Request start to the last byte of the response, in milliseconds. */
  ms: number;
}

export class JsonClient {
  private readonly agent: Agent;

  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
    maxSockets = 256,
  ) {
    if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(baseUrl)) throw new Error(`the benchmark only targets 127.0.0.1, not ${baseUrl}`);
    this.agent = new Agent({ keepAlive: true, maxSockets });
  }

  send(method: string, path: string, body?: unknown, timeoutMs = 120_000): Promise<Reply> {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string | number> = { authorization: `Bearer ${this.apiKey}` };
    if (data) (headers["content-type"] = "application/json"), (headers["content-length"] = data.length);
    const started = performance.now();
    return new Promise((done, fail) => {
      const req = request(`${this.baseUrl}${path}`, { method, agent: this.agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", fail);
        res.on("end", () => {
          const ms = performance.now() - started;
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // kept as text
          }
          done({ status: res.statusCode ?? 0, body: parsed, ms });
        });
      });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
      req.on("error", fail);
      req.end(data);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
