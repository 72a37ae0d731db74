// The known device profiles and clusters built from them: a cluster is one profile × a total device count,
// filled node by node (devicesPerNode per node, the last node possibly partial).
import { checkCalibrationProfile, type Calibration } from "./calibration.js";
import type { DeviceProfile } from "./profile.js";
import { a100_80g } from "./profiles/a100-80g.js";
import { cpu } from "./profiles/cpu.js";
import { h100_sxm } from "./profiles/h100-sxm.js";
import { h200 } from "./profiles/h200.js";

const PROFILES: readonly DeviceProfile[] = [cpu, a100_80g, h100_sxm, h200];

/** A bad cluster request (unknown profile, impossible device count): the CLI reports it as a usage error. */
export class ClusterError extends Error {}

export interface Cluster {
  readonly profile: DeviceProfile;
  /** Total devices. */
  readonly devices: number;
  readonly nodes: number;
  /** Measured op times that override the profile's estimates (see calibration.ts), when loaded. */
  readonly calibration?: Calibration;
}

export function profileNames(): string[] {
  return PROFILES.map((p) => p.name);
}

export function getProfile(name: string): DeviceProfile {
  const p = PROFILES.find((x) => x.name === name);
  if (!p) throw new ClusterError(`unknown cluster '${name}'; known clusters: ${profileNames().join(", ")}`);
  return p;
}

export function clusterFor(name: string, devices: number, calibration?: Calibration): Cluster {
  const profile = getProfile(name);
  if (!Number.isInteger(devices) || devices < 1) {
    throw new ClusterError(`the device count must be a positive integer, got ${devices}`);
  }
  if (calibration) checkCalibrationProfile(calibration, profile.name);
  const cluster = { profile, devices, nodes: Math.ceil(devices / profile.devicesPerNode) };
  return calibration ? { ...cluster, calibration } : cluster;
}

/** The node holding a device (ranks fill nodes in order). */
export function nodeOf(cluster: Cluster, rank: number): number {
  if (!Number.isInteger(rank) || rank < 0 || rank >= cluster.devices) {
    throw new Error(`internal: rank ${rank} is outside the cluster's ${cluster.devices} devices`);
  }
  return Math.floor(rank / cluster.profile.devicesPerNode);
}
