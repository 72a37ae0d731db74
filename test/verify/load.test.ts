// The loader rejects every kind of broken plan with a PlanError naming the JSON path, and never crashes.
import { describe, expect, it } from "vitest";
import { loadPlan, parsePlan } from "../../src/verify/load.js";
import { PlanError } from "../../src/plan/plan-error.js";
import type { Plan } from "../../src/plan/plan.js";
import { planToJson } from "../../src/plan/serialize.js";
import { compileSample } from "../compile/helpers.js";

const good = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp", no_sync: false }).plan;

/** Plan JSON as tests poke at it: any field, any value. */
type Mutable = Record<string, any>;

/** A deep copy of the good plan, broken by `edit`. */
function broken(edit: (p: Mutable) => void): string {
  const copy = JSON.parse(planToJson(good)) as Mutable;
  edit(copy);
  return JSON.stringify(copy);
}

function rejection(text: string): PlanError {
  try {
    parsePlan(text);
  } catch (e) {
    if (e instanceof PlanError) return e;
    throw new Error(`expected a PlanError, got ${String(e)}`);
  }
  throw new Error("expected the plan to be rejected");
}

describe("loading a plan", () => {
  it("accepts the plans compile writes", () => {
    expect(parsePlan(planToJson(good))).toEqual(good as Plan);
  });

  const cases: [string, (p: Mutable) => void, string, RegExp][] = [
    ["wrong format", (p) => (p.format = "onnx"), "format", /not an fsm plan/],
    ["a newer version", (p) => (p.version = 3), "version", /^plan version 3 is newer than this fsm \(2\); upgrade fsm$/],
    ["a missing field", (p) => delete p.settings.batch, "settings.batch", /missing/],
    ["an ill-typed field", (p) => (p.programs[1].actions[3].deps = "3"), "programs[1].actions[3].deps", /expected an array/],
    ["a dependency on no action", (p) => (p.programs[1].actions[3].deps = [99999]), "programs[1].actions[3].deps[0]", /out of range/],
    ["a self-dependency", (p) => (p.programs[0].actions[2].deps = [2]), "programs[0].actions[2].deps[0]", /itself/],
    ["a partial point on no action", (p) => (p.programs[0].actions.find((a: Mutable) => a.partial).partial[0][0] = -1), "", /out of range/],
    ["a tensor id out of range", (p) => (p.graph.ops[5].inputs[0] = 1e6), "graph.ops[5].inputs[0]", /tensor id/],
    ["a parameter's tensor out of range", (p) => (p.graph.params[3].tensor = 1e6), "graph.params[3].tensor", /tensor id/],
    ["a parameter alias that is no name", (p) => (p.graph.params[2].aliases = [7]), "graph.params[2].aliases[0]", /expected a string/],
    ["a state of an unknown role", (p) => (p.graph.states[4].role = "velocity"), "graph.states[4].role", /one of momentum/],
    ["an update that is no pair", (p) => p.graph.updates[1].pop(), "graph.updates[1]", /expected 2 elements/],
    ["a gradient of a parameter that is no name", (p) => (p.graph.paramGrads[0][0] = 5), "graph.paramGrads[0][0]", /expected a string/],
    ["a rank out of range", (p) => (p.stages[0].ranks[0] = 4), "stages[0].ranks[0]", /rank/],
    ["a layer out of range", (p) => (p.stages[1].layers[1] = 99), "stages[1].layers[1]", /layer/],
    ["action text that is no action", (p) => (p.programs[0].actions[0].text = "0X1"), "programs[0].actions[0].text", /unknown action kind/],
    ["action text with a stray field", (p) => (p.programs[0].actions[0].text = "0F1@3"), "programs[0].actions[0].text", /takes no peer/],
    ["a peer outside the cluster", (p) => (p.programs[0].actions.find((a: Mutable) => /SEND_F/.test(a.text)).text = "0SEND_F0@77"), "", /peer rank 77/],
    ["an action on no stream", (p) => p.programs[0].streams.comm.pop(), "", /on no stream/],
    ["an action on the wrong stream", (p) => p.programs[0].streams.compute.push(p.programs[0].streams.comm.pop()), "", /belongs to the comm stream/],
    ["a buffer past its arena", (p) => (p.memory[0].buffers[0].offset = p.memory[0].arenaBytes), "memory[0].buffers[0].offset", /runs past the arena/],
    ["a buffer naming no action", (p) => (p.memory[1].buffers[2].to = 1e6), "memory[1].buffers[2].to", /action id/],
    ["a buffer released after no layer", (p) => (p.memory[0].buffers.find((b: Mutable) => b.toLayer !== undefined).toLayer = 99), "", /layer index/],
    ["a prediction per device missing", (p) => p.predicted.peakMemoryBytes.pop(), "predicted.peakMemoryBytes", /one entry per device/],
    ["a shard group rank out of range", (p) => (p.shard[0].ranks[1] = 9), "shard[0].ranks[1]", /rank/],
    ["a stage count that disagrees with the settings", (p) => p.stages.pop(), "stages", /expected 2 stages/],
    ["a shard group that does not divide the replicas", (p) => (p.settings.shardGroup = 3), "settings.shardGroup", /shard group 3 does not divide dataParallel 2/],
    ["a no_sync that is no boolean", (p) => (p.settings.noSync = "yes"), "settings.noSync", /true or false|boolean/],
    ["an unknown schedule", (p) => (p.settings.schedule = "pipedream"), "settings.schedule", /one of gpipe, 1f1b/],
    ["an op attribute removed", (p) => delete p.graph.ops.find((o: Mutable) => o.op === "sgd_update" || o.op === "adam_update" || o.op === "adamw_update").attrs.lr, "", /attribute 'lr' is missing/],
    ["an op attribute of the wrong type", (p) => (p.graph.ops.find((o: Mutable) => o.op === "layer_norm").attrs.eps = "small"), "", /attribute 'eps' must be a float, got "small"/],
    ["a non-dimension shape", (p) => (p.graph.tensors[0].shape[0] = "B*B"), "graph.tensors[0].shape[0]", /not a dimension/],
  ];
  for (const [what, edit, path, message] of cases) {
    it(`rejects ${what} with its JSON path`, () => {
      const e = rejection(broken(edit));
      if (path !== "") expect(e.path).toBe(path);
      expect(e.reason).toMatch(message);
      if (path !== "") expect(e.message.startsWith(`${path}: `)).toBe(true);
    });
  }

  it("names paths exactly for partial points, peers and streams", () => {
    const partialAt = good.programs[0]!.actions.findIndex((a) => a.partial !== undefined);
    expect(rejection(broken((p) => (p.programs[0].actions[partialAt].partial[0][0] = -1))).path).toBe(`programs[0].actions[${partialAt}].partial[0][0]`);
    const send = good.programs[0]!.actions.findIndex((a) => a.text.includes("SEND_F"));
    expect(rejection(broken((p) => (p.programs[0].actions[send].text = "0SEND_F0@77"))).path).toBe(`programs[0].actions[${send}].text`);
    const last = good.programs[0]!.streams.comm[good.programs[0]!.streams.comm.length - 1]!;
    expect(rejection(broken((p) => p.programs[0].streams.comm.pop())).path).toBe(`programs[0].actions[${last}]`);
  });

  it("rejects text that is not JSON, and a missing file, without crashing", () => {
    expect(rejection("{ not json").message).toMatch(/^not valid JSON/);
    expect(rejection("[]").message).toMatch(/expected an object, got an array/);
    expect(() => loadPlan("/no/such/plan.json")).toThrow(PlanError);
    expect(() => loadPlan("/no/such/plan.json")).toThrow(/cannot read \/no\/such\/plan\.json: ENOENT/);
  });
});
