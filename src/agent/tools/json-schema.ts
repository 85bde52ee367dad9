// A small validator for the JSON Schema subset our tool parameters use. Its error texts go back to the model
// as the tool result, so each names the field by path (`arguments.url: expected string, got number`) and
// says what would be accepted: the model fixes its call from this text alone.

export type JsonType = "object" | "string" | "number" | "integer" | "boolean" | "array" | "null";

/** The supported subset; other keywords (description, default, …) are carried for the model and ignored here. */
export type JsonSchema = {
  type?: JsonType | JsonType[];
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean;
  enum?: readonly unknown[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  items?: JsonSchema;
  default?: unknown;
};

/** Validation stops after this many problems: enough for the model to fix a call, short enough to read. */
const MAX_ERRORS = 5;

/** Returns the problems found, each prefixed with its path; an empty list means the value is valid. */
export function validateJson(value: unknown, schema: JsonSchema, path = "arguments"): string[] {
  const errors: string[] = [];
  visit(value, schema, path, errors);
  return errors.slice(0, MAX_ERRORS);
}

function visit(value: unknown, schema: JsonSchema, path: string, errors: string[]): void {
  if (errors.length >= MAX_ERRORS) return;

  if (schema.type !== undefined) {
    const allowed = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!allowed.some((type) => hasType(value, type))) {
      errors.push(`${path}: expected ${allowed.join(" or ")}, got ${describeType(value)}`);
      return;
    }
  }

  if (schema.enum !== undefined && !schema.enum.some((option) => jsonEqual(option, value))) {
    const options = schema.enum.map((option) => JSON.stringify(option)).join(", ");
    errors.push(`${path}: expected one of ${options}, got ${preview(value)}`);
    return;
  }

  if (typeof value === "string") checkString(value, schema, path, errors);
  else if (typeof value === "number") checkNumber(value, schema, path, errors);
  else if (Array.isArray(value)) {
    if (schema.items !== undefined) {
      for (const [index, item] of value.entries()) visit(item, schema.items, `${path}[${index}]`, errors);
    }
  } else if (isPlainObject(value)) checkObject(value, schema, path, errors);
}

function checkString(value: string, schema: JsonSchema, path: string, errors: string[]): void {
  // JSON Schema counts code points, not UTF-16 units; only count when a bound is set.
  if (schema.minLength === undefined && schema.maxLength === undefined) return;
  const length = countCodePoints(value);
  if (schema.minLength !== undefined && length < schema.minLength) {
    errors.push(`${path}: expected at least ${schema.minLength} character(s), got ${length}`);
  }
  if (schema.maxLength !== undefined && length > schema.maxLength) {
    errors.push(`${path}: expected at most ${schema.maxLength} characters, got ${length}`);
  }
}

function checkNumber(value: number, schema: JsonSchema, path: string, errors: string[]): void {
  if (schema.minimum !== undefined && value < schema.minimum) {
    errors.push(`${path}: expected a number >= ${schema.minimum}, got ${value}`);
  }
  if (schema.maximum !== undefined && value > schema.maximum) {
    errors.push(`${path}: expected a number <= ${schema.maximum}, got ${value}`);
  }
}

function checkObject(value: Record<string, unknown>, schema: JsonSchema, path: string, errors: string[]): void {
  const properties = schema.properties ?? {};
  for (const name of schema.required ?? []) {
    if (!Object.hasOwn(value, name)) errors.push(`${path}.${name}: required field is missing`);
  }
  for (const [name, propertyValue] of Object.entries(value)) {
    const propertySchema = Object.hasOwn(properties, name) ? properties[name] : undefined;
    if (propertySchema !== undefined) {
      visit(propertyValue, propertySchema, `${path}.${name}`, errors);
    } else if (schema.additionalProperties === false) {
      const known = Object.keys(properties);
      const hint = known.length > 0 ? ` (allowed: ${known.join(", ")})` : "";
      errors.push(`${path}.${truncate(name, 40)}: unknown field${hint}`);
    }
  }
}

function hasType(value: unknown, type: JsonType): boolean {
  switch (type) {
    case "object":
      return isPlainObject(value);
    case "array":
      return Array.isArray(value);
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "null":
      return value === null;
  }
}

function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return `number ${preview(value)}`;
  return typeof value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function jsonEqual(left: unknown, right: unknown): boolean {
  if (left === right) return true;
  if (typeof left !== "object" || typeof right !== "object" || left === null || right === null) return false;
  return JSON.stringify(left) === JSON.stringify(right);
}

function countCodePoints(text: string): number {
  let count = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    // A high surrogate followed by a low surrogate is one code point.
    if (code >= 0xd800 && code <= 0xdbff && index + 1 < text.length) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) index++;
    }
    count++;
  }
  return count;
}

function preview(value: unknown): string {
  return truncate(JSON.stringify(value) ?? String(value), 60);
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
