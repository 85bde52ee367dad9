// A libSQL server (sqld) answers SQLITE_BUSY when write transactions of several requests overlap, instead of
// queueing them; an embedded file does the same once busy_timeout runs out. A statement or batch refused
// as busy was not applied (the batch rolled back), so running it again is safe. Other errors are not retried:
// after a network error a write may or may not have landed.
import type { Client } from "@libsql/client";

const maxAttempts = 12;
const firstDelayMs = 5;
const maxDelayMs = 250;

export function isBusyError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  const text = `${typeof code === "string" ? code : ""} ${error.message}`;
  return /SQLITE_BUSY|SQLITE_LOCKED|database is locked|database table is locked/i.test(text);
}

async function withBusyRetry<T>(run: () => Promise<T>, sleep: (ms: number) => Promise<void>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= maxAttempts || !isBusyError(error)) throw error;
      // Jittered exponential wait (5 ms doubling to 250 ms): about 2 s in all before giving up.
      const delay = Math.min(maxDelayMs, firstDelayMs * 2 ** (attempt - 1));
      await sleep(delay / 2 + Math.random() * (delay / 2));
    }
  }
}

/** The same client, with `execute` and `batch` retried while the database answers busy. */
export function retryWhenBusy(client: Client, sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms))): Client {
  return new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property === "execute" || property === "batch") {
        return (...args: unknown[]) => withBusyRetry(() => (value as (...inner: unknown[]) => Promise<unknown>).apply(target, args), sleep);
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
