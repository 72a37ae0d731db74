// Corrupt checkpoints (issue 18), each through `fsm run --resume` and `fsm consolidate`: a rank file of
// another step, rank or plan, an edited manifest, a flipped byte in tensor data, a truncated, missing or
// directory rank file — and `consolidate -o` where it must not write. One real 2-step checkpoint of the
// mlp sample (2 data-parallel devices, a save after each step) is made once and copied into every case.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { filesUnder, fsmBin, hostileCases, sample, type HostileCase } from "./harness.js";

const base = mkdtempSync(join(tmpdir(), "fsm-hostile-ckpt-"));
const mlp = sample("mlp.fsm");

function fsm(cwd: string, ...argv: string[]): void {
  const r = spawnSync(process.execPath, [fsmBin, ...argv], { cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`fsm ${argv.join(" ")} failed:\n${r.stderr}`);
}

beforeAll(() => {
  // ck: steps 1 and 2 (the manifest names step 2); other: the same model under another plan (batch 16).
  fsm(base, "run", mlp, "--devices", "2", "--steps", "2", "--save", "ck", "--save-every", "1");
  fsm(base, "run", mlp, "--devices", "2", "--steps", "2", "--save", "other", "--set", "train.batch=16");
}, 60_000);
afterAll(() => rmSync(base, { recursive: true, force: true }));

// What every case's checkpoint held right after setup, to check that a refused command left it intact.
const snapshots = new Map<string, Map<string, string>>();
function snapshot(dir: string): Map<string, string> {
  return new Map(filesUnder(join(dir, "ck")).map((f) => [f, readFileSync(join(dir, "ck", f)).toString("base64")]));
}
const intact = (dir: string): void => expect(snapshot(dir)).toEqual(snapshots.get(dir));

/** A copy of the checkpoint, corrupted by `corrupt` (given the case's ck directory). */
const checkpoint = (corrupt: (ck: string) => void = () => {}) => (dir: string): void => {
  cpSync(join(base, "ck"), join(dir, "ck"), { recursive: true });
  corrupt(join(dir, "ck"));
  snapshots.set(dir, snapshot(dir));
};

const RANK1 = "step-000002/rank-00001.safetensors";
const resume = ["run", mlp, "--devices", "2", "--steps", "1", "--resume", "ck"];
/** Resuming into another plan (1 device): the resharding path, which reads the rank files in pieces. */
const reshard = ["run", mlp, "--devices", "1", "--steps", "1", "--resume", "ck"];
const consolidate = ["consolidate", "ck", "-o", "model.safetensors"];
const withOptimizer = [...consolidate, "--optimizer"];

/** The same corruption through resume, consolidate and consolidate --optimizer; each must leave ck as it was. */
function everywhere(name: string, corrupt: (ck: string) => void, message: RegExp, also: { reshard?: boolean } = {}): HostileCase[] {
  const runs: [string, string[]][] = [["run --resume", resume], ["consolidate", consolidate], ["consolidate --optimizer", withOptimizer]];
  if (also.reshard) runs.push(["run --resume into another plan", reshard]);
  return runs.map(([how, argv]) => ({ name: `${name}: ${how}`, setup: checkpoint(corrupt), argv, message, after: intact }));
}

/** Flips the lowest mantissa bit of element `at` of `tensor`: a silently different value, still finite. */
function flipBit(file: string, tensor: string, at: number): void {
  const bytes = readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.toString("utf8", 8, 8 + n)) as Record<string, { data_offsets: [number, number] }>;
  bytes[8 + n + header[tensor]!.data_offsets[0] + 4 * at]! ^= 0x01;
  writeFileSync(file, bytes);
}

const manifest = (ck: string): Record<string, unknown> => JSON.parse(readFileSync(join(ck, "latest.json"), "utf8")) as Record<string, unknown>;
const editManifest = (ck: string, edit: Record<string, unknown>): void => writeFileSync(join(ck, "latest.json"), JSON.stringify({ ...manifest(ck), ...edit }, null, 2));

describe("corrupt checkpoints", () =>
  hostileCases([
    ...everywhere("a rank file of another step", (ck) => cpSync(join(ck, "step-000001/rank-00001.safetensors"), join(ck, RANK1)), /ck\/step-000002\/rank-00001\.safetensors says step 1, .*latest\.json says step 2/, { reshard: true }),
    ...everywhere("a rank file of another rank", (ck) => cpSync(join(ck, "step-000002/rank-00000.safetensors"), join(ck, RANK1)), /ck\/step-000002\/rank-00001\.safetensors says it is rank 0/),
    ...everywhere("latest.json's step edited", (ck) => editManifest(ck, { step: 5 }), /ck\/latest\.json says step 5 but names directory step-000002/),
    ...everywhere("latest.json names another step's directory", (ck) => editManifest(ck, { dir: "step-000001" }), /ck\/latest\.json says step 2 but names directory step-000001/),
    ...everywhere("a flipped byte in tensor data", (ck) => flipBit(join(ck, RANK1), "hidden_layers.2.fc.weight", 100), /ck\/step-000002\/rank-00001\.safetensors: tensor \S+ fails its checksum \(crc32 [0-9a-f]{8}, recorded [0-9a-f]{8}\)/, { reshard: true }),
    ...everywhere("a truncated rank file", (ck) => writeFileSync(join(ck, RANK1), readFileSync(join(ck, RANK1)).subarray(0, 5000)), /ck\/step-000002\/rank-00001\.safetensors[: ].*truncated/),
    ...everywhere("a missing rank file", (ck) => rmSync(join(ck, RANK1)), /ck\/step-000002\/rank-00001\.safetensors is missing/),
    ...everywhere("latest.json is not JSON", (ck) => writeFileSync(join(ck, "latest.json"), "{ \"format\": \"fsm-checkpoint\", "), /ck\/latest\.json is not valid JSON/),
    ...everywhere("a rank file replaced by a directory", (ck) => {
      rmSync(join(ck, RANK1));
      mkdirSync(join(ck, RANK1));
    }, /ck\/step-000002\/rank-00001\.safetensors is a directory, not a rank file/),
    ...everywhere("a rank file of another plan", (ck) => cpSync(join(base, "other", RANK1), join(ck, RANK1)), /ck\/step-000002\/rank-00001\.safetensors belongs to another plan \(fingerprint [0-9a-f]+; ck\/latest\.json has [0-9a-f]+\)/),
  ]));

describe("consolidate -o where it must not write", () =>
  hostileCases([
    { name: "-o into a rank file of the checkpoint it reads", setup: checkpoint(), argv: ["consolidate", "ck", "-o", `ck/${RANK1}`], message: /^ck\/step-000002\/rank-00001\.safetensors: error: -o is inside the checkpoint ck that it reads/m, after: intact },
    { name: "-o onto the checkpoint's manifest", setup: checkpoint(), argv: ["consolidate", "ck", "-o", "ck/latest.json"], message: /^ck\/latest\.json: error: -o is inside the checkpoint ck that it reads \(latest\.json\)/m, after: intact },
    { name: "-o onto an older step's rank file, through a symlink to the checkpoint", setup: (dir) => {
      checkpoint()(dir);
      symlinkSync("ck", join(dir, "link"));
    }, argv: ["consolidate", "ck", "-o", "link/step-000001/rank-00000.safetensors"], message: /^link\/step-000001\/rank-00000\.safetensors: error: -o is inside the checkpoint ck that it reads \(step-000001\/rank-00000\.safetensors\)/m, after: intact },
    { name: "-o into a directory", setup: (dir) => {
      checkpoint()(dir);
      mkdirSync(join(dir, "out"));
    }, argv: ["consolidate", "ck", "-o", "out"], message: /^out: error: -o is a directory/m, after: (dir) => {
      intact(dir);
      expect(statSync(join(dir, "out")).isDirectory()).toBe(true);
    } },
    { name: "-o into an unwritable path", setup: checkpoint(), argv: ["consolidate", "ck", "-o", "/proc/x.safetensors"], message: /^\/proc\/x\.safetensors: error: -o: cannot write: E[A-Z]+/m, after: intact },
    { name: "-o into a directory that does not exist", setup: checkpoint(), argv: ["consolidate", "ck", "-o", "no/such/dir/model.safetensors"], message: /^no\/such\/dir\/model\.safetensors: error: -o: directory no\/such\/dir does not exist/m, after: intact },
    // A consolidation that fails midway (a flipped bit in the last tensor it writes) leaves no temporary file.
    { name: "a consolidate that fails while writing leaves no .tmp file", setup: checkpoint((ck) => flipBit(join(ck, RANK1), "head.bias.momentum", 3)), argv: withOptimizer, message: /rank-00001\.safetensors: tensor head\.bias\.momentum fails its checksum/, after: intact },
  ]));
