// Request helpers shared by the routes: JSON bodies parsed once, errors shaped by the API contract.
import type { Context } from "hono";
import type * as v from "valibot";
import { AppError, ValidationError } from "../errors.ts";
import { parseInput } from "../validation.ts";

/** Reads a JSON body: 415 for another media type, 400 for malformed JSON, then schema validation naming the field. */
export async function readJsonBody<const TSchema extends v.GenericSchema>(c: Context, schema: TSchema): Promise<v.InferOutput<TSchema>> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/([a-z0-9.+-]*\+)?json\b/i.test(type)) {
    throw new AppError("unsupported_media_type", 415, "Send the body as application/json.");
  }
  const text = await c.req.text();
  let json: unknown;
  try {
    json = text.trim() === "" ? {} : JSON.parse(text);
  } catch {
    throw new ValidationError("The body is not valid JSON.", { fields: [{ field: "body", message: "malformed JSON" }] });
  }
  return parseInput(schema, json);
}

export function errorResponse(c: Context, error: AppError): Response {
  for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
  return c.json(error.toBody(), error.status as 400);
}

export const sessionIdPattern = /^[A-Za-z0-9:._-]{1,128}$/;

/** Path ids are checked before any query, so `../`, encoded separators or oversized ids never reach the store. */
export function sessionIdParam(c: Context): string {
  const id = c.req.param("id") ?? "";
  if (!sessionIdPattern.test(id)) {
    throw new ValidationError("Invalid session id.", { fields: [{ field: "id", message: "must match ^[A-Za-z0-9:._-]{1,128}$" }] });
  }
  return id;
}

export function integerQuery(c: Context, name: string, fallback: number, min: number, max: number): number {
  const raw = c.req.query(name);
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(`Invalid query parameter ${name}.`, { fields: [{ field: name, message: `must be an integer between ${min} and ${max}` }] });
  }
  return value;
}

export function booleanQuery(c: Context, name: string): boolean {
  const raw = c.req.query(name);
  if (raw === undefined || raw === "" || raw === "false" || raw === "0") return false;
  if (raw === "true" || raw === "1") return true;
  throw new ValidationError(`Invalid query parameter ${name}.`, { fields: [{ field: name, message: "must be true or false" }] });
}
