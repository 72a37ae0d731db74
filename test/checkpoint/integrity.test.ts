// A checkpoint's integrity (issue 18): every tensor's checksum is written with it and checked wherever its
// bytes are read (whole, in part, in chunks); every rank file's step, rank and plan are checked against the
// manifest, and the manifest's step against the directory it names; a checkpoint written before checksums
// still loads, unverified and said so; `consolidate -o` never writes into the checkpoint it reads.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { consolidate } from "../../src/checkpoint/consolidate.js";
import { readManifest, type Manifest } from "../../src/checkpoint/manifest.js";
import { openPieces } from "../../src/checkpoint/pieces.js";
import { openRankFile } from "../../src/checkpoint/rank-file.js";
import { readSafetensors, readSafetensorsHeader, writeSafetensors, type SafeTensor } from "../../src/checkpoint/safetensors.js";
import { runCli as run } from "../support/cli.js";
import { samplePath } from "../compile/helpers.js";

const root = mkdtempSync(join(tmpdir(), "fsm-integrity-"));
const f32 = (values: number[]): SafeTensor => ({ dtype: "F32", shape: [values.length], data: new Uint8Array(Float32Array.from(values).buffer) });

/** The file's header as JSON and where its data starts. */
function header(file: string): { json: Record<string, unknown>; n: number; bytes: Buffer } {
  const bytes = readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  return { json: JSON.parse(bytes.toString("utf8", 8, 8 + n)) as Record<string, unknown>, n, bytes };
}

/** Flips the lowest bit of element `at` of `tensor`. */
function flip(file: string, tensor: string, at: number): void {
  const { json, n, bytes } = header(file);
  bytes[8 + n + (json[tensor] as { data_offsets: number[] }).data_offsets[0]! + 4 * at]! ^= 1;
  writeFileSync(file, bytes);
}

/** Rewrites a file's metadata (the header re-padded, the data kept): files as an fsm before checksums wrote them. */
function rewriteMetadata(file: string, edit: (m: Record<string, string>) => Record<string, string>): void {
  const { json, n, bytes } = header(file);
  json.__metadata__ = edit(json.__metadata__ as Record<string, string>);
  let text = JSON.stringify(json);
  text += " ".repeat((8 - (text.length % 8)) % 8);
  const head = Buffer.alloc(8);
  head.writeBigUInt64LE(BigInt(text.length));
  writeFileSync(file, Buffer.concat([head, Buffer.from(text), bytes.subarray(8 + n)]));
}
const withoutChecksums = (m: Record<string, string>): Record<string, string> => Object.fromEntries(Object.entries(m).filter(([k]) => k !== "checksum" && !k.startsWith("crc32:")));

describe("safetensors checksums", () => {
  it("every tensor's CRC-32 is in the metadata; a flipped bit is found, naming file and tensor; a file without checksums still reads", () => {
    const file = join(root, "t.safetensors");
    writeSafetensors(file, new Map([["a", f32([1, 2, 3])], ["b", f32([4, 5])]]), { note: "x" });
    const { metadata } = readSafetensorsHeader(file);
    expect(metadata).toMatchObject({ note: "x", checksum: "crc32" });
    expect(metadata["crc32:a"]).toMatch(/^[0-9a-f]{8}$/);
    expect(metadata["crc32:a"]).not.toBe(metadata["crc32:b"]);
    expect(metadata["crc32:a"]).not.toBe("00000000"); // the placeholder was replaced
    expect(Array.from(new Float32Array(new Uint8Array(readSafetensors(file).tensors.get("b")!.data).buffer))).toEqual([4, 5]);
    flip(file, "b", 1);
    expect(() => readSafetensors(file)).toThrow(/t\.safetensors: tensor b fails its checksum \(crc32 [0-9a-f]{8}, recorded [0-9a-f]{8}\)/);
    rewriteMetadata(file, withoutChecksums);
    expect(readSafetensors(file).tensors.size).toBe(2); // unverified: no checksum to check against
    // Says it has checksums but lacks one: the header is corrupt.
    rewriteMetadata(file, (m) => ({ ...m, checksum: "crc32" }));
    expect(() => readSafetensors(file)).toThrow(/tensor a has no valid checksum in the metadata \(crc32:a is missing\)/);
  });

  it("a directory where a file should be is refused as such, not read", () => {
    mkdirSync(join(root, "d.safetensors"));
    expect(() => readSafetensorsHeader(join(root, "d.safetensors"))).toThrow(/d\.safetensors is not a valid safetensors file: it is a directory/);
  });

  it("a piece read only in part is verified whole first, so a flipped bit outside the part read is found too", () => {
    // Two rank files each holding half of tensor w (8 elements); reading elements 2..5 reads part of each.
    const dir = join(root, "pieces");
    mkdirSync(join(dir, "step-000001"), { recursive: true });
    for (const r of [0, 1]) {
      writeSafetensors(join(dir, "step-000001", `rank-0000${r}.safetensors`), new Map([["w", f32([0, 1, 2, 3].map((i) => 4 * r + i))]]), { format: "fsm-checkpoint", fingerprint: "p", device: String(r), step: "1", "range:w": `${4 * r},4` });
    }
    const m: Manifest = { format: "fsm-checkpoint", version: 1, model: "m", fingerprint: "p", step: 1, devices: 2, dir: "step-000001", params: { w: [8] }, roles: [] };
    const into = new Float32Array(4);
    openPieces(dir, m).readRange("w", 2, 4, into, 0);
    expect(Array.from(into)).toEqual([2, 3, 4, 5]);
    flip(join(dir, "step-000001", "rank-00001.safetensors"), "w", 3); // element 7: not among those read
    expect(() => openPieces(dir, m).readRange("w", 2, 4, into, 0)).toThrow(/rank-00001\.safetensors: tensor w fails its checksum/);
    // Whole pieces are checked as they are read, without the extra pass.
    expect(() => openPieces(dir, m).read("w", 8)).toThrow(/rank-00001\.safetensors: tensor w fails its checksum/);
    // Rank 1 holding rank 0's half (its own metadata, the same elements): elements no rank holds are named.
    writeSafetensors(join(dir, "step-000001", "rank-00001.safetensors"), new Map([["w", f32([0, 1, 2, 3])]]), { format: "fsm-checkpoint", fingerprint: "p", device: "1", step: "1", "range:w": "0,4" });
    expect(() => openPieces(dir, m).read("w", 8)).toThrow(/no rank holds element 4 of w/);
  });
});

describe("a checkpoint's files agree with its manifest", () => {
  const ck = join(root, "ck");
  const dir = (name: string): string => {
    const d = join(root, name);
    cpSync(ck, d, { recursive: true });
    return d;
  };
  beforeAll(async () => {
    const r = await run("run", samplePath("mlp"), "--devices", "2", "--steps", "2", "--save", ck, "--save-every", "1");
    expect(r.code, r.stderr).toBe(0);
  }, 60_000);

  it("each rank file records its step, rank and world; each disagreement is named with both sides", () => {
    const m = readManifest(ck);
    expect(openRankFile(ck, m, 1).metadata).toMatchObject({ step: "2", device: "1", devices: "2", fingerprint: m.fingerprint, checksum: "crc32" });
    const d = dir("disagree");
    const file = join(d, "step-000002", "rank-00001.safetensors");
    const cases: [Record<string, string>, RegExp][] = [
      [{ step: "7" }, /rank-00001\.safetensors says step 7, but \S+latest\.json says step 2/],
      [{ device: "0" }, /rank-00001\.safetensors says it is rank 0, but \S+latest\.json names it as rank 1's file/],
      [{ devices: "4" }, /says devices 4, but \S+latest\.json says devices 2/],
      [{ seed: "9" }, /says seed 9, but \S+latest\.json says seed 1/],
      [{ fingerprint: "abc" }, /rank-00001\.safetensors belongs to another plan \(fingerprint abc; \S+latest\.json has [0-9a-f]+\)/],
    ];
    const good = readFileSync(file);
    for (const [edit, message] of cases) {
      rewriteMetadata(file, (meta) => ({ ...meta, ...edit }));
      expect(() => openRankFile(d, readManifest(d), 1)).toThrow(message);
      writeFileSync(file, good);
    }
    expect(() => openRankFile(d, readManifest(d), 1)).not.toThrow();
  });

  it("the manifest's step is the directory it names and its data position", () => {
    const d = dir("manifest");
    const m = JSON.parse(readFileSync(join(d, "latest.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(join(d, "latest.json"), JSON.stringify({ ...m, step: 1 }));
    expect(() => readManifest(d)).toThrow(/latest\.json says step 1 but names directory step-000002 \(a save writes step-000001\)/);
    writeFileSync(join(d, "latest.json"), JSON.stringify({ ...m, data: { ...(m.data as object), position: 1 } }));
    expect(() => readManifest(d)).toThrow(/latest\.json says step 2 but data position 1/);
    writeFileSync(join(d, "latest.json"), JSON.stringify(m));
    expect(readManifest(d).step).toBe(2);
  });

  it("a checkpoint written before checksums resumes and consolidates, with a warning naming its files", async () => {
    const d = dir("legacy");
    for (const r of [0, 1]) rewriteMetadata(join(d, "step-000002", `rank-0000${r}.safetensors`), (meta) => withoutChecksums(meta));
    const resumed = await run("run", samplePath("mlp"), "--devices", "2", "--steps", "1", "--resume", d);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toMatch(/warning: 2 rank files \(\S+rank-00000\.safetensors, \.\.\.\) carry no checksums \(written by an fsm before them\): their data is read unverified/);
    const merged = await run("consolidate", d, "-o", join(root, "legacy.safetensors"));
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stderr).toMatch(/carry no checksums/);
    // And a checksummed one says nothing of the kind.
    const fresh = await run("consolidate", ck, "-o", join(root, "fresh.safetensors"));
    expect(fresh.stderr).toBe("");
  }, 60_000);

  it("consolidate -o: not into the checkpoint's manifest or step directories (beside them is fine), a directory or a missing one", () => {
    const d = dir("output");
    expect(() => consolidate(d, join(d, "latest.json"))).toThrow(/-o is inside the checkpoint \S+ that it reads \(latest\.json\)/);
    expect(() => consolidate(d, join(d, "step-000001", "x.safetensors"))).toThrow(/-o is inside the checkpoint/);
    expect(() => consolidate(d, join(d, "step-000002"))).toThrow(/-o is a directory/);
    expect(() => consolidate(d, join(d, "none", "x.safetensors"))).toThrow(/-o: directory \S+none does not exist/);
    expect(consolidate(d, join(d, "model.safetensors")).tensors).toBeGreaterThan(0);
    expect(readdirSync(d).sort()).toEqual(["latest.json", "model.safetensors", "step-000001", "step-000002"]);
  });
});
