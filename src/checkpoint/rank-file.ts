// A rank file read in pieces: its safetensors header first, checked against the manifest that names it
// (openRankFile), then exactly the byte ranges wanted, straight into their destination. Resuming, resharding
// and consolidating read checkpoints this way, so none holds a whole file in memory — and none reads a rank
// file of another step, rank or plan that happens to lie where the manifest points.
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { hasChecksums } from "./checksum.js";
import { CHECKPOINT_FORMAT, CheckpointError, rankFile, type Manifest } from "./manifest.js";
import { readSafetensorsHeader, type SafeHeaderEntry } from "./safetensors.js";

export interface RankFile {
  readonly path: string;
  readonly tensors: Record<string, SafeHeaderEntry>;
  readonly metadata: Record<string, string>;
  readonly dataStart: number;
  /** Whether its tensors carry checksums (files of an fsm before them do not: read unverified). */
  readonly checksummed: boolean;
}

/** Device `device`'s file of the checkpoint `m` in `dir`, its header read and its metadata checked against
 *  the manifest: the same plan (fingerprint), step, rank, world size and data state. Metadata a file lacks
 *  (another tool's file, an older fsm's) is not held against it. */
export function openRankFile(dir: string, m: Manifest, device: number): RankFile {
  const path = join(dir, m.dir, rankFile(device));
  const manifest = join(dir, "latest.json");
  let kind;
  try {
    kind = statSync(path);
  } catch {
    throw new CheckpointError(`${path} is missing (${manifest} names ${m.devices} rank file${m.devices === 1 ? "" : "s"} in ${m.dir})`);
  }
  if (kind.isDirectory()) throw new CheckpointError(`${path} is a directory, not a rank file`);
  const { tensors, metadata, dataStart } = readSafetensorsHeader(path);
  const disagree = (what: string, theirs: string, ours: string): never => {
    throw new CheckpointError(`${path} says ${what} ${theirs}, but ${manifest} says ${what} ${ours} (a rank file of another save, copied or left here?)`);
  };
  if (metadata.format !== undefined && metadata.format !== CHECKPOINT_FORMAT) throw new CheckpointError(`${path} is not an fsm rank file (its format is '${metadata.format}')`);
  if (metadata.fingerprint !== undefined && metadata.fingerprint !== m.fingerprint) {
    throw new CheckpointError(`${path} belongs to another plan (fingerprint ${metadata.fingerprint}; ${manifest} has ${m.fingerprint})`);
  }
  if (metadata.step !== undefined && metadata.step !== String(m.step)) disagree("step", metadata.step, String(m.step));
  if (metadata.device !== undefined && metadata.device !== String(device)) {
    throw new CheckpointError(`${path} says it is rank ${metadata.device}, but ${manifest} names it as rank ${device}'s file (a rank file copied over another?)`);
  }
  if (metadata.devices !== undefined && metadata.devices !== String(m.devices)) disagree("devices", metadata.devices, String(m.devices));
  if (m.data && metadata.data_position !== undefined && metadata.data_position !== String(m.data.position)) disagree("data position", metadata.data_position, String(m.data.position));
  if (m.data && metadata.seed !== undefined && metadata.seed !== String(m.data.seed)) disagree("seed", metadata.seed, String(m.data.seed));
  return { path, tensors, metadata, dataStart, checksummed: hasChecksums(metadata) };
}

export function readBytes(file: string, offset: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  readInto(file, offset, out, 0, length);
  return out;
}

/** `length` bytes of `file` from `offset` into `out` at `at` (no intermediate copy: pieces go straight home). */
export function readInto(file: string, offset: number, out: Buffer, at: number, length: number): void {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (e) {
    throw new CheckpointError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    // A read returns at most about 2 GiB: a larger piece takes several.
    for (let done = 0; done < length; ) {
      const n = readSync(fd, out, at + done, length - done, offset + done);
      if (n === 0) throw new CheckpointError(`${file} is truncated`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
}
