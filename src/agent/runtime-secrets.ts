// Inline provider keys are write-only: encrypted with HERMES_SECRET_KEY before they are stored, decrypted
// only to build a provider client, never returned.
import * as v from "valibot";
import { decryptSecret, encryptSecret } from "../crypto.ts";
import { ValidationError } from "../errors.ts";
import { StoredRuntimeSchema, runtimeProblem, type RuntimeInput, type StoredRuntime } from "./runtime.ts";
import { describeIssues } from "../validation.ts";

async function sealKey(secretKey: Uint8Array<ArrayBuffer> | null, apiKey: string, field: string): Promise<string> {
  if (!secretKey) {
    throw new ValidationError(`Inline ${field} needs HERMES_SECRET_KEY on the server; name a variable with api_key_env instead.`, {
      fields: [{ field, message: "inline keys are refused without HERMES_SECRET_KEY" }],
    });
  }
  return encryptSecret(secretKey, apiKey);
}

/** Turns a validated runtime input into its stored form, encrypting inline keys. */
export async function toStoredRuntime(input: RuntimeInput, secretKey: Uint8Array<ArrayBuffer> | null): Promise<StoredRuntime> {
  const { api_key, fallback, ...rest } = input;
  const stored: StoredRuntime = { ...rest };
  if (api_key !== undefined) stored.api_key_enc = await sealKey(secretKey, api_key, "runtime.api_key");
  if (fallback) {
    stored.fallback = await Promise.all(
      fallback.map(async ({ api_key: entryKey, ...entry }, index) =>
        entryKey === undefined ? entry : { ...entry, api_key_enc: await sealKey(secretKey, entryKey, `runtime.fallback.${index}.api_key`) },
      ),
    );
  }
  return checkStoredRuntime(stored);
}

/** Validates the stored form and the cross-field rules; a failure is a 400 naming the field. */
export function checkStoredRuntime(runtime: StoredRuntime): StoredRuntime {
  const result = v.safeParse(StoredRuntimeSchema, runtime);
  if (!result.success) {
    const fields = describeIssues(result.issues, "runtime");
    throw new ValidationError(`Invalid field ${fields[0]?.field ?? "runtime"}: ${fields[0]?.message ?? "invalid"}`, { fields });
  }
  const problem = runtimeProblem(result.output);
  if (problem) throw new ValidationError(`Invalid field ${problem.field}: ${problem.message}`, { fields: [problem] });
  return result.output;
}

/**
 * A PATCH merges the given fields over the stored runtime. When the provider changes, the old provider's
 * base URL, API mode, key variable and inline key are dropped unless given again, so the new provider's
 * defaults apply (the `/model` command does the same).
 */
export async function mergeRuntime(stored: StoredRuntime, input: Partial<RuntimeInput>, secretKey: Uint8Array<ArrayBuffer> | null): Promise<StoredRuntime> {
  const base: StoredRuntime = { ...stored };
  if (input.provider !== undefined && input.provider !== stored.provider) {
    delete base.base_url;
    delete base.api_mode;
    delete base.api_key_env;
    delete base.api_key_enc;
  }
  const { api_key, fallback, ...rest } = input;
  const merged: StoredRuntime = { ...base, ...(rest as Partial<StoredRuntime>) };
  if (api_key !== undefined) merged.api_key_enc = await sealKey(secretKey, api_key, "runtime.api_key");
  if (fallback !== undefined) {
    const sealed = await toStoredRuntime({ provider: merged.provider, model: merged.model, fallback }, secretKey);
    merged.fallback = sealed.fallback ?? [];
  }
  return checkStoredRuntime(merged);
}

export async function openKey(secretKey: Uint8Array<ArrayBuffer> | null, sealed: string): Promise<string> {
  if (!secretKey) throw new Error("an inline provider key is stored but HERMES_SECRET_KEY is not configured");
  return decryptSecret(secretKey, sealed);
}
