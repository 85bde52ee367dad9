// Conformance of the Deno entry (src/entry/deno.ts) over a libSQL file and a libSQL server.
import { defineConformanceSuite } from "./suite.ts";

defineConformanceSuite("deno", ["file", "sqld"]);
