// Conformance of the Bun entry (src/entry/bun.ts) over a libSQL file and a libSQL server.
import { defineConformanceSuite } from "./suite.ts";

defineConformanceSuite("bun", ["file", "sqld"]);
