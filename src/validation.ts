import * as v from "valibot";
import { ValidationError } from "./errors.ts";

export interface FieldIssue {
  field: string;
  message: string;
}

/** Flattens valibot issues into `{field, message}` pairs, with dotted paths (`runtime.retry.max_retries`). */
export function describeIssues(issues: readonly v.BaseIssue<unknown>[], prefix = ""): FieldIssue[] {
  return issues.map((issue) => {
    const path = v.getDotPath(issue);
    const field = [prefix, path].filter(Boolean).join(".") || prefix || "body";
    return { field, message: issue.message };
  });
}

/** Parses input at the boundary; a failure is a 400 whose details name every offending field. */
export function parseInput<const TSchema extends v.GenericSchema>(schema: TSchema, input: unknown, prefix = ""): v.InferOutput<TSchema> {
  const result = v.safeParse(schema, input);
  if (result.success) return result.output;
  const fields = describeIssues(result.issues, prefix);
  const first = fields[0];
  throw new ValidationError(first ? `Invalid field ${first.field}: ${first.message}` : "Invalid request.", { fields });
}
