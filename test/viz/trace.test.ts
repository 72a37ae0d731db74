// `fsm viz --trace`: a measured step drawn beside the predicted one — from a small hand-made trace with
// checked numbers, and from a real `fsm run --trace` — and traces that cannot be drawn for the plan rejected
// with a clear message (exit 1).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loadPlan } from "../../src/verify/load.js";
import { measuredStep, parseTrace } from "../../src/viz/trace.js";
import { buildViewModel } from "../../src/viz/view-model.js";
import { samplePath } from "../compile/helpers.js";
import { runCli as run } from "../support/cli.js";
import { svgsOf, xmlProblems } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-viz-trace-"));
const plan = join(dir, "mlp.json");

interface Ev {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  args?: Record<string, unknown>;
}

/** Two steps of a 4-device mlp plan (2 stages × 2 replicas, 1 micro-batch): forward, send, backward, optimizer. */
function handMade(): Ev[] {
  const events: Ev[] = [{ name: "process_name", ph: "M", pid: 0, tid: 0, args: { name: "device 0" } }];
  for (const step of [1, 2]) {
    const t0 = (step - 1) * 1000;
    for (const d of [0, 1]) {
      events.push({ name: "0F0", ph: "X", pid: d, tid: 0, ts: t0 + 10, dur: 40, args: { step, kernels: "matmul" } });
      events.push({ name: "0SEND_F0@2", ph: "X", pid: d, tid: 1, ts: t0 + 50, dur: 20, args: { step } });
      events.push({ name: "0B0", ph: "X", pid: d, tid: 0, ts: t0 + 200, dur: 60, args: { step } });
      events.push({ name: "0OPTIMIZER", ph: "X", pid: d, tid: 0, ts: t0 + 300, dur: 10, args: { step } });
    }
    for (const d of [2, 3]) {
      events.push({ name: "1F0", ph: "X", pid: d, tid: 0, ts: t0 + 70, dur: 50, args: { step } });
      events.push({ name: "1B0", ph: "X", pid: d, tid: 0, ts: t0 + 120, dur: 60, args: { step } });
      events.push({ name: "1OPTIMIZER", ph: "X", pid: d, tid: 0, ts: t0 + 300, dur: 20, args: { step } });
    }
  }
  return events;
}

function write(name: string, value: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof value === "string" ? value : JSON.stringify(value));
  return path;
}

beforeAll(async () => {
  const r = await run("compile", samplePath("mlp"), "--devices", "4", "--set", "parallel.stages=2", "--set", "parallel.chunks=1", "-o", plan);
  expect(r.code, r.stderr).toBe(0);
});

describe("viz --trace", () => {
  it("draws the last step every device finished, timed from its first event, a row per device", () => {
    // Device 3 has no events in step 2, so step 1 is the last complete one.
    const events = handMade().filter((e) => !(e.pid === 3 && e.args?.["step"] === 2));
    const m = measuredStep(parseTrace(JSON.stringify({ traceEvents: events })), 4);
    expect(m.step).toBe(1);
    expect(m.steps).toEqual([1, 2]);
    expect(m.stepSeconds).toBeCloseTo(310e-6, 12); // 10 µs .. 320 µs
    const vm = buildViewModel(loadPlan(plan), { measured: m });
    const rows = vm.measured!.rows;
    expect(rows.map((r) => r.label)).toEqual(["rank 0", "rank 1", "rank 2", "rank 3"]);
    const r0 = rows[0]!;
    expect(r0.lanes[0].blocks.map((b) => [b.label, b.start, b.end])).toEqual([
      ["F0", 0, 40e-6],
      ["B0", 190e-6, 250e-6],
      ["opt", 290e-6, 300e-6],
    ]);
    expect(r0.lanes[0].blocks[0]!.details).toContain("kernels: matmul");
    expect(r0.lanes[0].idle.map((g) => [g.start, g.end])).toEqual([
      [40e-6, 190e-6],
      [250e-6, 290e-6],
      [300e-6, 310e-6],
    ]);
    expect(r0.lanes[1].blocks.map((b) => b.label)).toEqual(["send F0"]);
    // --step picks another step, even one a device is missing from.
    expect(measuredStep(parseTrace(JSON.stringify(events)), 4, 2).step).toBe(2);
  });

  it("through the CLI: text and HTML draw the measured timeline below the predicted one", async () => {
    const trace = write("hand.json", { traceEvents: handMade() });
    const text = await run("viz", plan, "--trace", trace, "--format", "text");
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/predicted step [^\n]*\n(.*\n){4}measured step 2 \(of 1-2\): 310\.0 µs; one column = /);
    expect(text.stdout).toContain("  rank 3  compute |");
    const html = await run("viz", plan, "--trace", trace, "--step", "1");
    expect(html.code, html.stderr).toBe(0);
    expect(html.stdout).toContain('data-timeline="measured"');
    for (const d of [0, 1, 2, 3]) expect(html.stdout).toContain(`data-device="${d}"`);
    expect(html.stdout).toContain("measured step 1 (of 1-2)");
    expect(svgsOf(html.stdout)).toHaveLength(4); // graph, predicted and measured timelines, memory
    for (const svg of svgsOf(html.stdout)) expect(xmlProblems(svg)).toEqual([]);
  });

  it("a real trace from fsm run --trace (gpt-tiny on 4 CPU devices, 2 steps)", async () => {
    const tiny = join(dir, "tiny.json");
    const trace = join(dir, "tiny-trace.json");
    expect((await run("compile", samplePath("gpt-tiny"), "--devices", "4", "-o", tiny)).code).toBe(0);
    const r = await run("run", tiny, "--steps", "2", "--trace", trace);
    expect(r.code, r.stderr).toBe(0);
    const text = await run("viz", tiny, "--trace", trace, "--format", "text");
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("measured step 2 (of 1-2): ");
    const svg = await run("viz", tiny, "--trace", trace, "--format", "svg");
    expect(xmlProblems(svg.stdout)).toEqual([]);
    expect(svg.stdout.match(/<g class="row measured" data-device="\d"/g)).toHaveLength(4);
  });

  it("a trace that cannot be drawn for this plan is an error with exit 1", async () => {
    const events = handMade();
    const cases: [string, unknown, RegExp][] = [
      ["notjson.json", "{traceEvents: [", /not a Chrome trace: not valid JSON/],
      ["object.json", { events: [] }, /not a Chrome trace: expected \{"traceEvents": \[\.\.\.\]\} or an array of events/],
      ["noph.json", [{ name: "x" }], /not a Chrome trace: traceEvents\[0\] is not an event with a "ph" phase/],
      ["empty.json", { traceEvents: events.filter((e) => e.ph !== "X") }, /the trace has no complete \("ph": "X"\) device events: nothing was measured/],
      ["tid.json", [{ ...events[1]!, tid: 7 }], /traceEvents\[0\] \(0F0\): "tid" must be 0 \(compute\) or 1 \(communication\), got 7/],
      ["dur.json", [{ ...events[1]!, dur: "long" }], /traceEvents\[0\] \(0F0\): "ts" and "dur" must be numbers/],
      ["eight.json", [...events, { ...events[1]!, pid: 7 }], /the trace's devices \(0-3, 7\) are not the plan's 4 \(0-3\): was it recorded from another plan\?/],
      ["two.json", events.filter((e) => e.pid < 2), /the trace's devices \(0-1\) are not the plan's 4 \(0-3\)/],
    ];
    for (const [name, value, message] of cases) {
      const r = await run("viz", plan, "--trace", write(name, value), "--format", "text");
      expect(r.code, name).toBe(1);
      expect(r.stderr, name).toMatch(new RegExp(`${name.replace(".", "\\.")}: error: ${message.source}`));
      expect(r.stdout).toBe("");
    }
    const step = await run("viz", plan, "--trace", write("ok.json", events), "--step", "9", "--format", "text");
    expect(step.code).toBe(1);
    expect(step.stderr).toMatch(/ok\.json: error: the trace has no step 9 \(it has steps 1-2\)/);
    const missing = await run("viz", plan, "--trace", join(dir, "none.json"), "--format", "text");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/none\.json: error: cannot read the trace: ENOENT/);
  });
});
