// Every malformed input under test/fixtures/errors states the diagnostics it must produce
// (`// expect: FSM300 5:11`); each must appear with that code, line and column, and nothing may throw.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { DIAGNOSTIC_CODES } from "../../src/diagnostics/codes.js";

const dir = join(import.meta.dirname, "../fixtures/errors");
const fixtures = readdirSync(dir).filter((f) => f.endsWith(".fsm")).sort();

/** `// expect: FSM300 5:11`, or `// expect: FSM201 _lib/other.fsm:2:8` for a diagnostic in an imported file. */
function expectations(fixture: string, text: string): { file: string; code: string; line: number; column: number }[] {
  return [...text.matchAll(/^\/\/ expect: (FSM\d+) (?:(\S+):)?(\d+):(\d+)$/gm)].map((m) => ({
    file: join(dir, m[2] ?? fixture),
    code: m[1]!,
    line: Number(m[3]),
    column: Number(m[4]),
  }));
}

describe("malformed inputs", () => {
  it("has at least 40 fixtures covering every error code", () => {
    expect(fixtures.length).toBeGreaterThanOrEqual(40);
    const covered = new Set(fixtures.flatMap((f) => expectations(f, readFileSync(join(dir, f), "utf8")).map((e) => e.code)));
    const errorCodes = Object.keys(DIAGNOSTIC_CODES).filter((c) => c !== "FSM390" && c !== "FSM510");
    expect(errorCodes.filter((c) => !covered.has(c))).toEqual([]);
  });

  for (const f of fixtures) {
    it(f, () => {
      const text = readFileSync(join(dir, f), "utf8");
      const expected = expectations(f, text);
      expect(expected.length, "fixture states its expected diagnostics").toBeGreaterThan(0);
      const result = checkFile(join(dir, f));
      const got = result.diagnostics.filter((d) => d.severity === "error").map((d) => ({ file: d.span.file, code: d.code, line: d.span.line, column: d.span.column }));
      for (const e of expected) expect(got).toContainEqual(e);
      expect(result.model).toBeUndefined();
      for (const d of result.diagnostics) {
        expect(d.span.line).toBeGreaterThanOrEqual(1);
        expect(d.span.column).toBeGreaterThanOrEqual(1);
      }
    });
  }
});
