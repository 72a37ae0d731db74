// The rank × step picture: a readable timeline of any schedule, cropped around marks when there are some.
import { describe, expect, it } from "vitest";
import { execute } from "../../src/schedule/execute.js";
import { lower } from "../../src/schedule/lower.js";
import { buildComputeOrder } from "../../src/schedule/orders/build.js";
import { renderPicture } from "../../src/schedule/picture.js";

describe("renderPicture", () => {
  const s = lower(buildComputeOrder({ schedule: "zero_bubble", ranks: 2, microBatches: 3, checkpoint: "except_last" }));
  const run = execute(s, () => 1);

  it("draws every stream of every rank, one unit step per column", () => {
    expect(renderPicture(s, run, { maxColumns: 40 })).toBe(
      [
        "step       | 0          1          2          3          4          5          6          7          8          9          10         11         12         13         14",
        "r0 compute | 0F0        0F1        0R0        .          .          .          0I0        0W0        0F2        0R1        .          0I1        0W1        0I2        0W2",
        "r0 comm    | .          0SEND_F0@1 0SEND_F1@1 .          .          0RECV_B0@1 .          .          .          0SEND_F2@1 0RECV_B1@1 .          0RECV_B2@1 .          .",
        "r1 compute | .          .          1F0        1R0        1I0        1F1        1R1        1I1        1W0        .          1F2        1I2        1W1        1W2        .",
        "r1 comm    | .          1RECV_F0@0 1RECV_F1@0 .          .          1SEND_B0@0 .          .          .          1RECV_F2@0 1SEND_B1@0 .          1SEND_B2@0 .          .",
      ].join("\n"),
    );
  });

  it("crops to a window of maxColumns steps around the first mark, with … where it cuts", () => {
    const id = s.actions.find((a) => a.rank === 1 && a.action.kind === "W" && a.action.mb === 1)!.id;
    const lines = renderPicture(s, run, { marks: new Set([id]), maxColumns: 6 }).split("\n");
    expect(lines[0]).toBe("step       | … 9          10         11         12         13         14");
    expect(lines[3]).toBe("r1 compute | … .          1F2        1I2        [1W1]      1W2        .");
  });
});
