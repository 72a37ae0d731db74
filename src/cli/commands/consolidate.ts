// `fsm consolidate DIR -o model.safetensors [--optimizer]`: a sharded checkpoint of `fsm run --save` merged
// into one safetensors file of full tensors named by parameter path (src/checkpoint/consolidate.ts).
import { CheckpointError } from "../../checkpoint/checkpoint.js";
import { consolidate, OutputError } from "../../checkpoint/consolidate.js";
import { unverifiedText } from "../../checkpoint/checksum.js";
import { SafetensorsError } from "../../checkpoint/safetensors.js";
import { flag, parseArgs } from "../args.js";
import type { CliIO } from "../io.js";
import type { Command } from "./command.js";

export const consolidateCommand: Command = {
  name: "consolidate",
  summary: "merge a sharded checkpoint into one safetensors file",
  usage: `fsm consolidate DIR [-o FILE] [--optimizer]

Reads DIR's latest checkpoint (written by 'fsm run --save DIR': one safetensors file per
device, parameters possibly sharded) and writes one safetensors file with every parameter
whole, named by its path, in fp32 — with --optimizer also its optimizer state
(NAME.exp_avg, ...). Streams: memory is bounded by the largest tensor. Written atomically,
never into DIR's own files. Every rank file is checked against DIR/latest.json (step, rank,
plan) and every tensor read against its checksum; a checkpoint of an fsm before checksums
is read unverified, with a warning.
  -o, --output FILE   where to write (default model.safetensors)
  --optimizer         include the optimizer state`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [{ name: "output", short: "o", value: true }, { name: "optimizer" }]);
    if (args.positionals.length !== 1) return -1;
    const dir = args.positionals[0]!;
    const out = flag(args, "output") ?? "model.safetensors";
    try {
      const r = consolidate(dir, out, { optimizer: args.flags.has("optimizer") });
      if (r.unverified.length > 0) io.stderr(`${dir}: warning: ${unverifiedText(r.unverified)}\n`);
      io.stdout(`wrote ${out}: ${r.tensors} tensors, ${r.bytes.toLocaleString("en-US")} bytes of data\n`);
      return 0;
    } catch (e) {
      if (e instanceof OutputError) {
        io.stderr(`${out}: error: ${e.message}\n`);
        return 1;
      }
      if (e instanceof CheckpointError || e instanceof SafetensorsError) {
        io.stderr(`${dir}: error: ${e.message}\n`);
        return 1;
      }
      throw e;
    }
  },
};
