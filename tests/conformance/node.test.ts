// Conformance of the Node entry (src/entry/node.ts, run with tsx) over a libSQL file and a libSQL server.
import { defineConformanceSuite } from "./suite.ts";

defineConformanceSuite("node", ["file", "sqld"]);
