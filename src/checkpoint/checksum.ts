// Checksums of safetensors tensors: a CRC-32 of each tensor's bytes, in the file's `__metadata__` as
// `crc32:NAME` (8 hex digits), with `checksum: "crc32"` saying every tensor has one. CRC-32 because zlib's
// is native and fast (about 1.7 GB/s on this machine, 3× sha256) and finds every flipped bit and burst of up
// to 32 — what disks and copies do; it is no defence against an attacker, which the checkpoint format never
// was. Per tensor, not per file, so a reader checks exactly the bytes it reads as it reads them (a resume
// reads every tensor whole; consolidating reads whole pieces) without a second pass over the file.
// Files written before checksums existed carry none: they are read unverified, and callers say so.
import { crc32 } from "node:zlib";
import { closeSync, openSync, readSync } from "node:fs";
import { SafetensorsError } from "./safetensors.js";

export const CHECKSUM = "crc32";
const keyOf = (name: string): string => `crc32:${name}`;
const hex = (crc: number): string => crc.toString(16).padStart(8, "0");
/** What a writer puts in the header before the data is known: the same width as any real checksum. */
export const PLACEHOLDER = hex(0);

/** The metadata entries recording `crcs` (by tensor name). */
export function checksumMetadata(crcs: ReadonlyMap<string, number>): Record<string, string> {
  const out: Record<string, string> = { checksum: CHECKSUM };
  for (const [name, crc] of crcs) out[keyOf(name)] = hex(crc);
  return out;
}

/** CRC-32 of `bytes`, continuing `previous` (a tensor read in chunks). */
export const checksumOf = (bytes: NodeJS.ArrayBufferView, previous = 0): number => crc32(bytes, previous);

/** The recorded checksum of tensor `name`, or undefined when the file records none (written by an older
 *  fsm, or by another tool). A file that says it has checksums but lacks this one is corrupt. */
export function recordedChecksum(path: string, metadata: Readonly<Record<string, string>>, name: string): number | undefined {
  if (metadata.checksum === undefined) return undefined;
  if (metadata.checksum !== CHECKSUM) throw new SafetensorsError(`${path}: unknown checksum kind '${metadata.checksum}' (this fsm knows ${CHECKSUM})`);
  const text = metadata[keyOf(name)];
  if (text === undefined || !/^[0-9a-f]{8}$/.test(text)) throw new SafetensorsError(`${path}: tensor ${name} has no valid checksum in the metadata (${keyOf(name)} is ${text === undefined ? "missing" : `'${text}'`}): the header is corrupt`);
  return Number.parseInt(text, 16);
}

/** Whether the file's tensors carry checksums at all. */
export const hasChecksums = (metadata: Readonly<Record<string, string>>): boolean => metadata.checksum !== undefined;

/** Throws, naming the file and tensor, when `actual` is not what the file recorded. */
export function checkChecksum(path: string, name: string, recorded: number | undefined, actual: number): void {
  if (recorded !== undefined && recorded !== actual) {
    throw new SafetensorsError(`${path}: tensor ${name} fails its checksum (crc32 ${hex(actual)}, recorded ${hex(recorded)}): the file's data is corrupt`);
  }
}

const CHUNK = 8 * 2 ** 20;

/** Verifies `length` bytes at `offset` of `path` against `recorded` by reading them in chunks (memory: one
 *  chunk), for a reader that will use only part of them (resharding into other shard boundaries). */
export function verifyRange(path: string, name: string, recorded: number | undefined, offset: number, length: number): void {
  if (recorded === undefined) return;
  const buffer = Buffer.allocUnsafe(Math.min(CHUNK, length));
  let crc = 0;
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new SafetensorsError(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    for (let done = 0; done < length; ) {
      const n = readSync(fd, buffer, 0, Math.min(buffer.length, length - done), offset + done);
      if (n === 0) throw new SafetensorsError(`${path} is truncated (tensor ${name} ends past the file)`);
      crc = checksumOf(buffer.subarray(0, n), crc);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  checkChecksum(path, name, recorded, crc);
}

/** The warning for rank files read without checksums (callers print it; reading them is not refused). */
export function unverifiedText(files: readonly string[]): string {
  const which = files.length === 1 ? files[0]! : `${files.length} rank files (${files[0]}, ...)`;
  return `${which} ${files.length === 1 ? "carries" : "carry"} no checksums (written by an fsm before them): ${files.length === 1 ? "its" : "their"} data is read unverified`;
}
