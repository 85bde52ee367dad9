/// <reference types="node" />
import type { Client } from "@libsql/client";
import { describe, expect, it } from "vitest";
import { isBusyError, retryWhenBusy } from "../../src/state/busy-retry.ts";

function busy(): Error {
  const error = new Error("SQLITE_BUSY: database is locked");
  (error as Error & { code: string }).code = "SQLITE_BUSY";
  return error;
}

/** A client whose first `failures` calls fail with the given error, then succeed. */
function flaky(failures: number, error: () => Error) {
  let calls = 0;
  const client = {
    async execute() {
      calls += 1;
      if (calls <= failures) throw error();
      return { rows: [], rowsAffected: 1 };
    },
    async batch() {
      calls += 1;
      if (calls <= failures) throw error();
      return [];
    },
    closed: false,
  } as unknown as Client;
  return { client, calls: () => calls };
}

describe("retry while the database is busy", () => {
  it("recognizes busy and locked errors only", () => {
    expect(isBusyError(busy())).toBe(true);
    expect(isBusyError(new Error("database table is locked"))).toBe(true);
    expect(isBusyError(new Error("UNIQUE constraint failed"))).toBe(false);
    expect(isBusyError("SQLITE_BUSY")).toBe(false);
  });

  it("runs a refused statement again until it is applied", async () => {
    const waits: number[] = [];
    const { client, calls } = flaky(3, busy);
    const result = await retryWhenBusy(client, async (ms) => void waits.push(ms)).execute("UPDATE x SET y = 1");
    expect(result.rowsAffected).toBe(1);
    expect(calls()).toBe(4);
    expect(waits).toHaveLength(3);
    expect(waits.every((ms) => ms > 0 && ms <= 250)).toBe(true);
  });

  it("does not retry other errors, and gives up on a database that stays busy", async () => {
    const other = flaky(1, () => new Error("network reset"));
    await expect(retryWhenBusy(other.client, async () => undefined).batch([])).rejects.toThrow("network reset");
    expect(other.calls()).toBe(1);
    const stuck = flaky(100, busy);
    await expect(retryWhenBusy(stuck.client, async () => undefined).execute("SELECT 1")).rejects.toThrow("SQLITE_BUSY");
    expect(stuck.calls()).toBe(12);
  });
});
