// The content hash: written by planToJson, verified and removed by the loader; any edit of what runs is
// refused as an edit after compile, the search report and key-preserving re-serialization are not edits.
import { describe, expect, it } from "vitest";
import { HASHED_SINCE_VERSION, planHash } from "../../src/plan/content-hash.js";
import { parsePlan } from "../../src/verify/load.js";
import { planToJson } from "../../src/plan/serialize.js";
import { fsdpPlan, refusal, type Mutable } from "../plan/plan-edits.js";

const written = (): Mutable => JSON.parse(planToJson(fsdpPlan)) as Mutable;

describe("the plan's content hash", () => {
  it("is written right after the version, and the loader hands on the plan without it", () => {
    const file = written();
    expect(Object.keys(file).slice(0, 3)).toEqual(["format", "version", "hash"]);
    expect(file.hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(file.version).toBeGreaterThanOrEqual(HASHED_SINCE_VERSION);
    const loaded = parsePlan(JSON.stringify(file));
    expect("hash" in loaded).toBe(false);
    expect(loaded).toEqual(fsdpPlan);
  });

  it("does not depend on the search report", () => {
    const { search: _s, ...rest } = fsdpPlan;
    expect(planHash(rest)).toBe(planHash(fsdpPlan));
    const file = written();
    file.search.stats.seconds = 123;
    expect(() => parsePlan(JSON.stringify(file))).not.toThrow();
  });

  const edits: [string, (p: Mutable) => void][] = [
    ["the seed", (p) => (p.run.seed += 1)],
    ["a buffer's offset", (p) => (p.memory[0].buffers[0].offset -= 64)],
    ["a data collective's bytes", (p) => (p.programs[0].actions.find((a: Mutable) => a.collective?.group === "data").collective.bytes += 4)],
    ["a predicted number", (p) => (p.predicted.stepTimeSeconds *= 2)],
  ];
  for (const [what, edit] of edits) {
    it(`refuses an edit of ${what} as an edit after compile`, () => {
      const file = written();
      edit(file);
      const e = refusal(() => parsePlan(JSON.stringify(file)));
      expect(e.path).toBe("hash");
      expect(e.reason).toMatch(/^the plan was edited after compile .*compile it again from .*gpt-tiny\.fsm/);
    });
  }

  it("refuses a missing or malformed hash, and loads a version-1 plan (written before hashes) without one", () => {
    const file = written();
    delete file.hash;
    expect(refusal(() => parsePlan(JSON.stringify(file))).message).toMatch(/^hash: missing/);
    expect(refusal(() => parsePlan(JSON.stringify({ ...file, hash: "md5:00" }))).message).toMatch(/^hash: expected "sha256:"/);
    expect(parsePlan(JSON.stringify({ ...file, version: 1 }))).toEqual({ ...fsdpPlan, version: 1 });
  });

  it("checks a hash whatever the version says: marking an edited plan version 1 does not skip the seal", () => {
    const file = written();
    file.version = 1;
    expect(refusal(() => parsePlan(JSON.stringify(file))).message).toMatch(/^hash: the plan was edited after compile/);
  });
});
