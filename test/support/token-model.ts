// A model trained on a token file: tok.fsm (vocabulary 64, batch 2 × 4, one device, `steps` steps) reading
// train.bin beside it, for tests of token data as `fsm run` reads it.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** Writes dir/tok.fsm and, when `ids` are given, dir/train.bin (u16); returns the model's path. */
export function writeTokenModel(dir: string, ids?: Uint16Array, steps = 3): string {
  const source = join(dir, "tok.fsm");
  writeFileSync(
    source,
    `model tok {
  wte = embedding(64, 8)
  head = linear(8, 64)
  forward(tokens: i32[B, S], targets: i32[B, S]) {
    return cross_entropy(head(wte(tokens)), targets)
  }
}
train {
  batch = 2, seq = 4
  optimizer = sgd(lr: 0.1)
  precision = fp32
  seed = 1
  steps = ${steps}
  data = tokens("train.bin", dtype: u16)
}
parallel { devices = 1 }
`,
  );
  if (ids) writeFileSync(join(dir, "train.bin"), ids);
  return source;
}
