// Hostile .fsm sources and numbers (issue 18): values that overflow or cannot be exact, position tables too
// short for the sequence, losses with nothing to train, inputs and ops that mix the samples of a batch that
// a plan splits, and floods of diagnostics. Each is refused at check (or compile) time with a located message.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe } from "vitest";
import { rng } from "../support/prng.js";
import { hostileCases, type HostileCase } from "./harness.js";

/** The diagnostic cap of src/diagnostics/code-frame.ts (clang's default error limit). */
const CAP = 20;

/** A one-layer regression model whose forward and train settings the case fills in. */
function regression(o: { inputs?: string; forward?: string; member?: string; train?: string; parallel?: string }): string {
  return [
    "model m {",
    `  fc = ${o.member ?? "linear(8, 8)"}`,
    `  forward(${o.inputs ?? "x: f32[B, 8], y: f32[B, 8]"}) {`,
    `    return ${o.forward ?? "mse_loss(fc(x), y)"}`,
    "  }",
    "}",
    "train {",
    "  batch = 8",
    `  ${o.train ?? "optimizer = sgd(lr: 0.1)"}`,
    "  steps = 2",
    "  data = synthetic()",
    "}",
    ...(o.parallel ? [`parallel { ${o.parallel} }`] : []),
    "",
  ].join("\n");
}

/** A tiny token model whose position table has `ctx` rows, trained at sequence length 16. */
function positionsModel(ctx: number): string {
  return [
    "model m {",
    "  wte = embedding(64, 8)",
    `  wpe = embedding(${ctx}, 8)`,
    "  head = linear(8, 64)",
    "  forward(tokens: i32[B, S], targets: i32[B, S]) {",
    "    return cross_entropy(head(wte(tokens) + wpe(positions(S))), targets)",
    "  }",
    "}",
    "train {",
    "  batch = 4, seq = 16",
    "  optimizer = sgd(lr: 0.1)",
    "  steps = 2",
    "  data = synthetic()",
    "}",
    "",
  ].join("\n");
}

const write = (name: string, text: string | Buffer) => (dir: string) => writeFileSync(join(dir, name), text);

/** Matches only when the whole stderr is at most n characters (no m flag: ^ and $ are the text's ends). */
const atMost = (n: number, inner: RegExp): RegExp => new RegExp(`^(?=[\\s\\S]*${inner.source})[\\s\\S]{1,${n}}$`);

const randomBytes = (): Buffer => {
  const next = rng(18);
  return Buffer.from(Array.from({ length: 3072 }, () => Math.floor(next() * 256)));
};

const cases: HostileCase[] = [
  // ---- numbers: non-finite and non-exact values
  {
    name: "a learning rate that overflows to Infinity (1e308 * 1e308)",
    setup: write("m.fsm", regression({ train: "optimizer = sgd(lr: 1e308 * 1e308)" })),
    argv: ["run", "m.fsm", "--steps", "1"],
    message: /m\.fsm:9:23: error\[FSM400\]: .*Infinity/,
  },
  {
    name: "Infinity by exponent overflow through a constant (clip_grad_norm = big * big)",
    setup: write("m.fsm", "const big = 1e200\n" + regression({ train: "clip_grad_norm = big * big\n  optimizer = sgd(lr: 0.1)" })),
    argv: ["check", "m.fsm"],
    message: /m\.fsm:10:20: error\[FSM400\]: .*Infinity/,
  },
  {
    name: "a dimension of 2^53 + 1 (rounded to 2^53 before)",
    setup: write("m.fsm", regression({ member: "linear(8, 9007199254740993)", forward: "mse_loss(fc(x), x)" })),
    argv: ["check", "m.fsm"],
    message: /m\.fsm:2:18: error\[FSM120\]: .*9007199254740993.*2\^53/,
  },
  {
    name: "a seed beyond 2^53 in the file",
    setup: write("m.fsm", regression({ train: "optimizer = sgd(lr: 0.1)\n  seed = 18446744073709551617" })),
    argv: ["run", "m.fsm", "--steps", "1"],
    message: /m\.fsm:10:10: error\[FSM120\]: .*18446744073709551617/,
  },
  {
    name: "a seed beyond 2^53 through --set",
    setup: write("m.fsm", regression({})),
    argv: ["run", "m.fsm", "--steps", "1", "--set", "train.seed=99999999999999999999"],
    message: /--set #1:1:\d+: error\[FSM120\]: .*99999999999999999999/,
  },
  {
    name: "integer arithmetic past 2^53 (a width of 2^32 * 2^32)",
    setup: write("m.fsm", "const wide = 4294967296 * 4294967296\n" + regression({ member: "linear(8, wide)", forward: "mse_loss(fc(x), x)" })),
    argv: ["check", "m.fsm"],
    message: /m\.fsm:1:14: error\[FSM400\]: .*2\^53/,
  },
  {
    name: "a symbolic dimension whose factor passes 2^53 (B * 2^52 * 4)",
    setup: write("m.fsm", regression({ forward: "mse_loss(reshape(fc(x), [B * 4503599627370496 * 4, 8]), y)" })),
    argv: ["check", "m.fsm"],
    message: /m\.fsm:4:37: error\[FSM400\]: .*2\^53/,
  },
  {
    name: "a number literal of 400 digits is quoted short",
    setup: write("m.fsm", regression({ train: `optimizer = sgd(lr: ${"9".repeat(400)})` })),
    argv: ["check", "m.fsm"],
    message: atMost(600, /m\.fsm:9:23: error\[FSM120\]/),
  },

  // ---- knowable at check time, found only by the runtime before
  {
    name: "positions(S) past the position table (native engine)",
    setup: write("m.fsm", positionsModel(4)),
    argv: ["run", "m.fsm", "--steps", "1"],
    message: /m\.fsm:6:45: error\[FSM409\]: positions\(S\).*S = 16.*'wpe' has 4 rows/,
  },
  {
    name: "positions(S) past the position table (reference engine)",
    setup: write("m.fsm", positionsModel(15)),
    argv: ["run", "m.fsm", "--steps", "1", "--engine", "reference"],
    message: /m\.fsm:6:45: error\[FSM409\]: .*'wpe' has 15 rows/,
  },
  {
    name: "a loss that depends on no parameter",
    setup: write("m.fsm", regression({ forward: "mse_loss(relu(x), y)" })),
    argv: ["run", "m.fsm", "--steps", "1"],
    message: /m\.fsm:4:12: error\[FSM410\]: .*no parameter/,
  },
  {
    name: "a loss that ignores the only member it calls",
    setup: write("m.fsm", regression({ forward: "mse_loss(relu(x), y + 0 * x)" }).replace("    return", "    h = fc(x)\n    return")),
    argv: ["compile", "m.fsm", "-o", "p.json"],
    message: /m\.fsm:5:12: error\[FSM410\]/,
  },

  // ---- samples mixed across the batch that a plan splits
  {
    name: "an input with two batch dimensions under --devices 2",
    setup: write("m.fsm", regression({ inputs: "x: f32[B, B, 8], y: f32[B, B, 8]" })),
    argv: ["run", "m.fsm", "--devices", "2", "--steps", "1"],
    maxMessages: 2,
    message: /m\.fsm:3:21: error\[FSM404\]: .*'x'.*batch dimension B/,
  },
  {
    name: "an input with two batch dimensions under 2 chunks",
    setup: write("m.fsm", regression({ inputs: "x: f32[B, 8, B], y: f32[B, 8, B]", forward: "mse_loss(transpose(fc(transpose(x, 1, 2)), 1, 2), y)" })),
    argv: ["run", "m.fsm", "--set", "parallel.chunks=2", "--steps", "1"],
    maxMessages: 2,
    message: /m\.fsm:3:24: error\[FSM404\]: .*'x'.*batch dimension B/,
  },
  {
    name: "an input whose batch dimension is not first, under 2 chunks (rows split wrongly before)",
    setup: write("m.fsm", regression({ inputs: "x: f32[B, 8], y: f32[8, B]", forward: "mse_loss(fc(x), transpose(y, 0, 1))" })),
    argv: ["run", "m.fsm", "--set", "parallel.chunks=2", "--steps", "1"],
    message: /m\.fsm:3:32: error\[FSM404\]: .*'y'.*batch dimension B first/,
  },
  {
    name: "softmax over the batch dimension under --devices 2",
    setup: write("m.fsm", regression({ forward: "mse_loss(softmax(fc(x), dim: 0), y)" })),
    argv: ["run", "m.fsm", "--devices", "2", "--steps", "1"],
    message: /m\.fsm: error: .*m\.fsm:4:21.*softmax.*batch dimension B.*2 data-parallel/,
  },
  {
    name: "softmax over the batch dimension under 2 chunks",
    setup: write("m.fsm", regression({ forward: "mse_loss(softmax(fc(x), dim: 0), y)", parallel: "chunks = 2" })),
    argv: ["run", "m.fsm", "--steps", "1"],
    message: /m\.fsm:4:21: error\[FSM506\]: softmax.*batch dimension B/,
  },
  {
    name: "a Gram matrix over the batch (matmul(transpose(x), x)) compiled for 2 devices",
    setup: write("m.fsm", regression({ forward: "mse_loss(fc(matmul(transpose(x, 0, 1), x)), fc(matmul(transpose(y, 0, 1), y)))" })),
    argv: ["compile", "m.fsm", "--cluster", "cpu", "--devices", "2", "-o", "p.json"],
    message: /m\.fsm: error: .*m\.fsm:4:24.*matmul/,
  },

  // ---- noise
  {
    name: "no spurious 'never called' warnings after an input's error",
    setup: write("m.fsm", regression({ inputs: "x: f33[B, 8], y: f32[B, 8]" })),
    argv: ["check", "m.fsm"],
    message: /^(?![\s\S]*FSM390)[\s\S]*m\.fsm:3:14: error\[FSM403\]/,
  },
  {
    name: "no spurious 'never called' warnings after a member's error",
    setup: write("m.fsm", regression({ member: "linear(8, 8, bogus: 1)" }).replace("  fc =", "  ln = layer_norm(8)\n  fc =").replace("fc(x)", "ln(fc(x))")),
    argv: ["check", "m.fsm"],
    message: /^(?![\s\S]*FSM390)[\s\S]*m\.fsm:3:21: error\[FSM303\]/,
  },
  {
    name: "3 KB of random bytes: at most the capped diagnostics, a short stderr",
    setup: write("m.fsm", randomBytes()),
    argv: ["check", "m.fsm"],
    maxMessages: CAP,
    message: atMost(24_000, /m\.fsm:\d+:\d+: error\[FSM1\d\d\][\s\S]*not shown/),
  },
  {
    name: "a hundred bad members: capped at the first errors",
    setup: write("m.fsm", regression({}).replace("  fc =", Array.from({ length: 100 }, (_, i) => `  m${i} = linear(8, unknown${i})\n`).join("") + "  fc =")),
    argv: ["check", "m.fsm"],
    maxMessages: CAP,
    message: atMost(12_000, /m\.fsm:2:\d+: error\[FSM300\][\s\S]*80 more errors not shown/),
  },
  {
    name: "a 5,000-character source line is echoed around the caret",
    setup: write("m.fsm", regression({ forward: `mse_loss(fc(x)${" + 0.5 * x".repeat(500)} + nope, y)` })),
    argv: ["check", "m.fsm"],
    message: atMost(800, /m\.fsm:4:50\d\d: error\[FSM300\]: unknown name 'nope'/),
  },
  // ---- a file with no model (found by the fuzzer: the message had neither a location nor "error")
  ...["compile", "cost", "graph"].map((cmd): HostileCase => ({
    name: `a file of blocks only, no model: fsm ${cmd}`,
    setup: write("blocks.fsm", "block B(d: int) {\n  fc = linear(d, d)\n  forward(x) {\n    return fc(x)\n  }\n}\n"),
    argv: [cmd, "blocks.fsm"],
    message: /blocks\.fsm:1:1: error: no model to (compile|cost|print): the file defines only blocks/,
  })),
];

describe("bad .fsm sources and numbers", () => hostileCases(cases));
