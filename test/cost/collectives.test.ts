// Alpha-beta collective times against hand-computed numbers, and which link a group runs over.
import { describe, expect, it } from "vitest";
import { clusterFor } from "../../src/cost/cluster.js";
import { collectiveTime, groupCollectiveTime, groupLink, type Link } from "../../src/cost/collectives.js";

// α = 10 us, β = 100 GB/s: 1 GB takes 10 ms of bandwidth time.
const link: Link = { bandwidth: 100e9, latency: 10e-6 };
const GB = 1e9;

describe("ring collectives, alpha-beta", () => {
  it("all-gather and reduce-scatter over 8 ranks: 7α + 7/8 · M/β", () => {
    // 7 × 10 us + 0.875 × 10 ms = 0.07 ms + 8.75 ms
    expect(collectiveTime("all_gather", GB, 8, link)).toBeCloseTo(8.82e-3, 12);
    expect(collectiveTime("reduce_scatter", GB, 8, link)).toBeCloseTo(8.82e-3, 12);
  });

  it("all-reduce over 8 ranks: 14α + 2·7/8 · M/β", () => {
    // 0.14 ms + 17.5 ms
    expect(collectiveTime("all_reduce", GB, 8, link)).toBeCloseTo(17.64e-3, 12);
  });

  it("broadcast and reduce over 4 ranks: 3α + M/β", () => {
    expect(collectiveTime("broadcast", GB, 4, link)).toBeCloseTo(10.03e-3, 12);
    expect(collectiveTime("reduce", GB, 4, link)).toBeCloseTo(10.03e-3, 12);
  });

  it("point-to-point: α + M/β", () => {
    expect(collectiveTime("send_recv", 1e6, 2, link)).toBeCloseTo(10e-6 + 10e-6, 15);
  });

  it("a group of one costs nothing", () => {
    expect(collectiveTime("all_reduce", GB, 1, link)).toBe(0);
  });
});

describe("links of a cluster", () => {
  const cluster = clusterFor("a100-80g", 16); // 2 nodes of 8

  it("a group inside one node uses NVLink at the achievable fraction", () => {
    expect(groupLink(cluster, [0, 1, 2, 3, 4, 5, 6, 7])).toEqual({ bandwidth: 300e9 * 0.8, latency: 3.4e-6 });
  });

  it("a group spanning nodes is limited by InfiniBand", () => {
    expect(groupLink(cluster, [7, 8])).toEqual({ bandwidth: 25e9 * 0.8, latency: 9.6e-6 });
    // All-reduce of 1 GB over all 16: 30 × 9.6 us + 2·15/16 × 1e9 / 20e9 s
    expect(groupCollectiveTime(cluster, "all_reduce", GB, [...Array(16).keys()])).toBeCloseTo(30 * 9.6e-6 + (30 / 16) * 0.05, 12);
  });
});
