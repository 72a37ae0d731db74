// Printed diagnostics stay bounded (src/diagnostics/code-frame.ts): at most MAX_SHOWN, errors first, the rest
// counted; long source lines cut to a window that keeps the caret under its column; control characters shown.
import { describe, expect, it } from "vitest";
import { formatDiagnostic, formatDiagnostics, lineWindow, MAX_SHOWN, shownDiagnostics } from "../../src/diagnostics/code-frame.js";
import { error, warning, type Diagnostic } from "../../src/diagnostics/diagnostic.js";
import { spanAt } from "../../src/diagnostics/span.js";

const text = "line one\nline two\n";
const at = (offset: number) => spanAt("f.fsm", text, offset, offset + 1);

describe("diagnostic cap", () => {
  it("prints everything up to the cap", () => {
    const diags = Array.from({ length: MAX_SHOWN }, () => error("FSM300", "bad", at(0)));
    const out = formatDiagnostics(diags, () => text);
    expect(out.match(/error\[FSM300\]/g)).toHaveLength(MAX_SHOWN);
    expect(out).not.toMatch(/not shown/);
  });

  it("keeps errors before warnings past the cap and counts the rest", () => {
    const warnings = Array.from({ length: 5 }, () => warning("FSM390", "unused", at(0)));
    const errors = Array.from({ length: MAX_SHOWN + 3 }, (_, i) => error("FSM300", `bad ${i}`, at(9)));
    const all: Diagnostic[] = [...warnings, ...errors];
    const shown = shownDiagnostics(all);
    expect(shown).toHaveLength(MAX_SHOWN);
    expect(shown.every((d) => d.severity === "error")).toBe(true);
    expect(shown[0]!.message).toBe("bad 0");
    const out = formatDiagnostics(all, () => text);
    expect(out).toMatch(/\.\.\. 3 more errors and 5 more warnings not shown \(only the first 20 are\)$/);
  });

  it("fills the places errors leave with warnings, in source order", () => {
    const all = [warning("FSM390", "w0", at(0)), ...Array.from({ length: MAX_SHOWN - 1 }, () => error("FSM300", "e", at(9))), warning("FSM390", "w1", at(9))];
    expect(shownDiagnostics(all).map((d) => d.message)).toEqual(["w0", ...Array(MAX_SHOWN - 1).fill("e")]);
  });
});

describe("source line window", () => {
  it("shows short lines whole and long ones around the caret", () => {
    expect(lineWindow(80, 70)).toEqual({ from: 0, to: 80 });
    expect(lineWindow(5000, 10)).toEqual({ from: 0, to: 120 });
    expect(lineWindow(5000, 3000)).toEqual({ from: 2960, to: 3080 });
    expect(lineWindow(5000, 4990)).toEqual({ from: 4880, to: 5000 });
  });

  it("keeps the caret under its column in a cut line", () => {
    const long = `${"a".repeat(3000)}XYZ${"b".repeat(2000)}`;
    const out = formatDiagnostic(error("FSM300", "unknown name 'XYZ'", spanAt("f.fsm", long, 3000, 3003)), () => long);
    const [, , src, caret] = out.split("\n");
    expect(src!.length).toBeLessThan(140);
    expect(src).toMatch(/^1 \| …a+XYZb+…$/);
    expect(src!.indexOf("XYZ")).toBe(caret!.indexOf("^^^"));
  });

  it("makes control characters visible one for one and cuts long messages", () => {
    const bin = "ab\u001b[2Jcd";
    const out = formatDiagnostic(error("FSM100", "x".repeat(1000), spanAt("f.fsm", bin, 6, 7)), () => bin);
    expect(out).not.toMatch(/\u001b/);
    const [head, , src, caret] = out.split("\n");
    expect(head!.length).toBeLessThan(450);
    expect(src!.indexOf("c")).toBe(caret!.indexOf("^"));
  });
});
