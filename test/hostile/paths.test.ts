// Hostile paths, data files, numeric flags and pipes (issue 18): every path fsm reads or writes is checked for
// its kind before use (no hang on a FIFO or /proc, no stack trace for a directory), before any training; data
// and calibration files are checked whole; a reader closing the pipe ends fsm quietly.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect } from "vitest";
import { writeTokenModel } from "../support/token-model.js";
import { fsmBin, hostileCases, sample } from "./harness.js";

/** Compiles a sample into dir/name (setup for the commands that read plans). */
function compile(dir: string, file: string, devices: number, name = "plan.json"): void {
  const r = spawnSync(process.execPath, [fsmBin, "compile", sample(file), "--devices", String(devices), "-o", join(dir, name)], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`setup: compile ${file} failed: ${r.stderr}`);
}

const fifo = (path: string): void => {
  execFileSync("mkfifo", [path]);
};

/** A token model reading train.bin (vocabulary 64), and the file: `n` u16 ids, with `bad` at index `at`. */
function tokenModel(dir: string, n = 1000, bad?: { at: number; id: number }): void {
  if (n === 0) {
    writeTokenModel(dir);
    return;
  }
  const ids = Uint16Array.from({ length: n }, (_, i) => i % 64);
  if (bad) ids[bad.at] = bad.id;
  writeTokenModel(dir, ids);
}

/** The MLP sample reading x.npy / y.npy from its directory. */
function npyModel(dir: string): void {
  writeFileSync(join(dir, "mlp.fsm"), `model mlp {
  fc = linear(4, 2)
  forward(x: f32[B, 4], y: f32[B, 2]) {
    return mse_loss(fc(x), y)
  }
}
train {
  batch = 2
  optimizer = sgd(lr: 0.1)
  precision = fp32
  seed = 1
  steps = 2
  data = npy(x: "x.npy", y: "y.npy")
}
parallel { devices = 1 }
`);
}

const calibration = (profile: string, forwardSeconds: number, backwardSeconds: number): string =>
  JSON.stringify({ format: "fsm-calibration", version: 1, profile, machine: "test", date: "2025-01-31", ops: [{ op: "linear", shape: "f32[1,32]|", forwardSeconds, backwardSeconds }] });

const noCheckpoint = (dir: string): void => {
  expect(existsSync(join(dir, "ckpt")), "a checkpoint was written although the run had to fail before training").toBe(false);
};

describe("paths of the wrong kind", () => hostileCases([
  { name: "--save under /proc (a recursive mkdir there spins forever)", argv: ["run", sample("mlp.fsm"), "--steps", "1", "--save", "/proc/ckpt"], message: /--save \/proc\/ckpt: \/proc is the kernel's virtual file system/, hangSeconds: 15 },
  { name: "--save over a regular file's subdirectory", setup: (d) => writeFileSync(join(d, "f"), "x"), argv: ["run", sample("mlp.fsm"), "--steps", "1", "--save", "f/ckpt"], message: /--save f\/ckpt: .*f is a regular file, not a directory/ },
  { name: "a FIFO as the token file", setup: (d) => { tokenModel(d, 0); fifo(join(d, "train.bin")); }, argv: ["run", "tok.fsm"], message: /token file train\.bin: is a FIFO \(named pipe\), not a regular file/, hangSeconds: 15 },
  { name: "a directory as the token file", setup: (d) => { tokenModel(d, 0); mkdirSync(join(d, "train.bin")); }, argv: ["run", "tok.fsm"], message: /token file train\.bin: is a directory, not a regular file/ },
  { name: "a directory as a .npy file", setup: (d) => { npyModel(d); mkdirSync(join(d, "x.npy")); mkdirSync(join(d, "y.npy")); }, argv: ["run", "mlp.fsm"], message: /\.npy file x\.npy for input 'x': is a directory, not a regular file/ },
  { name: "--trace into a directory fails before training (no checkpoint written)", setup: (d) => mkdirSync(join(d, "traces")), argv: ["run", sample("mlp.fsm"), "--steps", "3", "--trace", "traces", "--save", "ckpt"], message: /--trace traces: is a directory; give a file name inside it/, after: noCheckpoint },
  { name: "--trace into a missing directory fails before training", argv: ["run", sample("mlp.fsm"), "--steps", "3", "--trace", "no/such/trace.json", "--save", "ckpt"], message: /--trace no\/such\/trace\.json: its directory no\/such does not exist/, after: noCheckpoint },
  { name: "--trace under /proc", argv: ["run", sample("mlp.fsm"), "--steps", "1", "--trace", "/proc/trace.json"], message: /--trace \/proc\/trace\.json: \/proc is the kernel's virtual file system/ },
  { name: "--init a directory", setup: (d) => mkdirSync(join(d, "w.safetensors")), argv: ["run", sample("mlp.fsm"), "--steps", "1", "--init", "w.safetensors"], message: /--init w\.safetensors: is a directory, not a regular file/ },
  { name: "--init a FIFO", setup: (d) => fifo(join(d, "w.safetensors")), argv: ["run", sample("mlp.fsm"), "--steps", "1", "--init", "w.safetensors"], message: /--init w\.safetensors: is a FIFO/, hangSeconds: 15 },
  { name: "--resume a regular file", setup: (d) => writeFileSync(join(d, "ckpt.json"), "{}"), argv: ["run", sample("mlp.fsm"), "--steps", "1", "--resume", "ckpt.json"], message: /--resume ckpt\.json: is a regular file, not a directory/ },
  { name: "calibrate -o into a directory", setup: (d) => { compile(d, "mlp.fsm", 1); mkdirSync(join(d, "out")); }, argv: ["calibrate", "plan.json", "-o", "out", "--repeats", "1"], message: /-o out: is a directory; give a file name inside it/ },
  { name: "calibrate -o into a missing directory", setup: (d) => compile(d, "mlp.fsm", 1), argv: ["calibrate", "plan.json", "-o", "none/cal.json", "--repeats", "1"], message: /-o none\/cal\.json: its directory none does not exist/ },
  { name: "compile -o into a directory names the directory, not a temp file", setup: (d) => mkdirSync(join(d, "out")), argv: ["compile", sample("mlp.fsm"), "--devices", "1", "-o", "out"], message: /-o out: is a directory/ },
  { name: "a FIFO as the plan", setup: (d) => fifo(join(d, "plan.json")), argv: ["viz", "plan.json", "--format", "text"], message: /plan\.json: error: invalid plan: cannot read plan\.json: is a FIFO/, hangSeconds: 15 },
  { name: "a FIFO as viz's trace", setup: (d) => { compile(d, "mlp.fsm", 1); fifo(join(d, "trace.json")); }, argv: ["viz", "plan.json", "--format", "text", "--trace", "trace.json"], message: /trace\.json: error: cannot read the trace: is a FIFO/, hangSeconds: 15 },
  { name: "a FIFO as the calibration file", setup: (d) => fifo(join(d, "cal.json")), argv: ["compile", sample("mlp.fsm"), "--devices", "1", "--calibration", "cal.json"], code: 2, message: /cannot read calibration file cal\.json: is a FIFO/, hangSeconds: 15 },
]));

describe("data and calibration files checked whole", () => hostileCases([
  { name: "a token id beyond the vocabulary, late in the file, is found before the first step", setup: (d) => tokenModel(d, 1000, { at: 900, id: 64 }), argv: ["run", "tok.fsm"], message: /token file train\.bin: token 64 at index 900 is outside the model's vocabulary of 64/ },
  { name: "a calibration measured for another profile", setup: (d) => writeFileSync(join(d, "cal.json"), calibration("cpu", 1e-6, 2e-6)), argv: ["compile", sample("mlp.fsm"), "--cluster", "h100-sxm", "--devices", "8", "--calibration", "cal.json"], code: 2, message: /calibration cal\.json was measured on 'cpu', not 'h100-sxm'/ },
  { name: "a calibration with all-zero times", setup: (d) => writeFileSync(join(d, "zero.json"), calibration("cpu", 0, 0)), argv: ["compile", sample("mlp.fsm"), "--devices", "1", "--calibration", "zero.json"], code: 2, message: /calibration zero\.json: ops\[0\]\.forwardSeconds is 0/ },
]));

describe("numbers on the command line", () => hostileCases([
  { name: "--steps beyond 2^53", argv: ["run", sample("mlp.fsm"), "--steps", "99999999999999999999"], code: 2, message: /--steps must be a positive integer of at most 9007199254740991, got '99999999999999999999'/ },
  { name: "--steps 1.5", argv: ["run", sample("mlp.fsm"), "--steps", "1.5"], code: 2, message: /--steps must be a positive integer, got '1\.5'/ },
  { name: "--steps -1", argv: ["run", sample("mlp.fsm"), "--steps", "-1"], code: 2, message: /--steps must be a positive integer, got '-1'/ },
  { name: "--devices 1e400", argv: ["run", sample("mlp.fsm"), "--devices", "1e400"], code: 2, message: /--devices must be a positive integer, got '1e400'/ },
  { name: "compile --devices beyond 2^53", argv: ["compile", sample("mlp.fsm"), "--devices", "99999999999999999999"], code: 2, message: /--devices must be a positive integer of at most 9007199254740991/ },
  { name: "--save-every beyond 2^53", argv: ["run", sample("mlp.fsm"), "--steps", "1", "--save", "ckpt", "--save-every", "99999999999999999999"], code: 2, message: /--save-every must be a positive integer of at most/ },
  { name: "--inject-fault with a step beyond 2^53", argv: ["run", sample("mlp.fsm"), "--inject-fault", "kernel@0:99999999999999999999"], code: 2, message: /--inject-fault: the device and step must be integers of at most/ },
  { name: "calibrate --repeats beyond 2^53", setup: (d) => compile(d, "mlp.fsm", 1), argv: ["calibrate", "plan.json", "--repeats", "99999999999999999999"], code: 2, message: /--repeats must be a positive integer of at most/ },
]));

describe("a reader that closes the pipe early", () => hostileCases([
  { name: "fsm run | head -1", argv: [], shell: (fsm) => `${fsm} run ${sample("mlp.fsm")} --steps 50 | head -1 >/dev/null`, code: 0, message: /^$/ },
  { name: "fsm schedule PLAN | (a reader that reads nothing)", setup: (d) => compile(d, "gpt-tiny.fsm", 4), argv: [], shell: (fsm) => `${fsm} schedule plan.json | true`, code: 0, message: /^$/ },
  { name: "fsm graph | (a reader that reads nothing)", argv: [], shell: (fsm) => `${fsm} graph ${sample("gpt2-124m.fsm")} | true`, code: 0, message: /^$/ },
]));
