import { describe } from "vitest";
import { hostileCases } from "./harness.js";
describe("usage and missing files", () => hostileCases([
  { name: "missing file", argv: ["check", "nope.fsm"], message: /nope\.fsm.*cannot read/ },
  { name: "bad flag", argv: ["compile", "--bogus"], code: 2, message: /bogus/ },
]));
