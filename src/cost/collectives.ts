// Alpha-beta times of the collectives, ring algorithms as NCCL runs them: a ring of n ranks takes n−1 steps
// (2(n−1) for all-reduce), each paying the link latency α, and moves the volumes nccl-tests uses to turn
// algorithm bandwidth into bus bandwidth (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
//   all-gather, reduce-scatter   (n−1)·α + (n−1)/n · M/β
//   all-reduce                  2(n−1)·α + 2(n−1)/n · M/β
//   broadcast, reduce            (n−1)·α + M/β          (pipelined chain)
//   send/recv (point-to-point)        α + M/β
// M is the full buffer (the gathered output of all-gather, the unreduced input of reduce-scatter), β the
// achievable bandwidth per device and direction. A group that spans nodes runs at the inter-node link's α and
// β throughout: the ring's slowest hop sets its pace (a hierarchical algorithm would do better; later).
// A cluster with a version-2 calibration prices each collective as the in-process communicator measured
// it instead (calibrated-pricing.ts), whatever the nodes: a run's CPU devices all live in one process.
import type { Calibration } from "./calibration.js";
import { calibratedCollectiveSeconds } from "./calibrated-pricing.js";
import { nodeOf, type Cluster } from "./cluster.js";
import type { DeviceProfile } from "./profile.js";

export const COLLECTIVES = ["all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce", "send_recv"] as const;
export type CollectiveKind = (typeof COLLECTIVES)[number];

/** A link as the model sees it: achievable bandwidth (bytes/s) and per-step latency (s). */
export interface Link {
  readonly bandwidth: number;
  readonly latency: number;
  /** Measured collectives that replace the α-β formulas for the kinds they measured. */
  readonly calibration?: Calibration;
}

/** Seconds for a collective of `bytes` over a group of `ranks` devices joined by `link`. */
export function collectiveTime(kind: CollectiveKind, bytes: number, ranks: number, link: Link): number {
  if (!Number.isInteger(ranks) || ranks < 1) throw new Error(`internal: a collective needs a positive group size, got ${ranks}`);
  if (!(bytes >= 0)) throw new Error(`internal: a collective needs a non-negative size, got ${bytes}`);
  // A group of one has nobody to talk to (a send to oneself is a no-op).
  if (ranks === 1) return 0;
  if (link.calibration) {
    const measured = calibratedCollectiveSeconds(link.calibration, kind, bytes, ranks);
    if (measured !== undefined) return measured;
  }
  if (kind === "send_recv") return link.latency + bytes / link.bandwidth;
  const n = ranks;
  switch (kind) {
    case "all_gather":
    case "reduce_scatter":
      return (n - 1) * link.latency + ((n - 1) / n) * (bytes / link.bandwidth);
    case "all_reduce":
      return 2 * (n - 1) * link.latency + ((2 * (n - 1)) / n) * (bytes / link.bandwidth);
    case "broadcast":
    case "reduce":
      return (n - 1) * link.latency + bytes / link.bandwidth;
  }
}

export function intraNodeLink(profile: DeviceProfile): Link {
  return { bandwidth: profile.intraNode.bandwidth * profile.achievable.link, latency: profile.intraNode.latency };
}

export function interNodeLink(profile: DeviceProfile): Link {
  return { bandwidth: profile.interNode.bandwidth * profile.achievable.link, latency: profile.interNode.latency };
}

/** The link a group of ranks communicates over: intra-node when all share a node, else inter-node. */
export function groupLink(cluster: Cluster, ranks: readonly number[]): Link {
  if (ranks.length === 0) throw new Error("internal: an empty communication group");
  const first = nodeOf(cluster, ranks[0]!);
  const spans = ranks.some((r) => nodeOf(cluster, r) !== first);
  const link = spans ? interNodeLink(cluster.profile) : intraNodeLink(cluster.profile);
  return withCalibration(link, cluster);
}

/** The link with the cluster's measured collectives, when its calibration has them. */
export function withCalibration(link: Link, cluster: Cluster): Link {
  return cluster.calibration?.collectives && cluster.calibration.collectives.length > 0 ? { ...link, calibration: cluster.calibration } : link;
}

/** A collective over the given ranks of a cluster. */
export function groupCollectiveTime(cluster: Cluster, kind: CollectiveKind, bytes: number, ranks: readonly number[]): number {
  return collectiveTime(kind, bytes, ranks.length, groupLink(cluster, ranks));
}
