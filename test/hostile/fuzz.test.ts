// Seeded fuzzing (issue 18), beside the hand-written hostile cases: mutated `.fsm` sources through
// `fsm check` (and, when they still check, `fsm compile`), mutated plans — both as edited (the content hash
// must refuse them) and re-sealed with a fresh hash (the loader's own checks must refuse or accept them
// whole) — through `schedule`, `viz` and `run`, and every byte of a checkpoint's rank file flipped in turn
// through `--resume`. Each case must end with exit 0 or 1, never a usage error, an internal error (exit 70)
// or a stack trace; a refusal names where (file:line:col, the plan's JSON path, or the file); nothing is
// left behind. The commands run in-process (`main`) so that several hundred cases take seconds, not minutes;
// the spawning harness next to this file covers the real binary.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { withHash } from "../../src/plan/content-hash.js";
import { rng } from "../support/prng.js";
import { filesUnder, sample } from "./harness.js";

const work = mkdtempSync(join(tmpdir(), "fsm-fuzz-"));
// The samples import their shared blocks by a path relative to the file: the mutants sit beside a copy.
cpSync(sample("lib"), join(work, "lib"), { recursive: true });
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface Outcome { readonly code: number; readonly stderr: string; readonly stdout: string }

async function fsm(...argv: string[]): Promise<Outcome> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

/** What every outcome must satisfy, whatever the input: bad input is exit 1 with a message, never a crash. */
function expectClean(o: Outcome, what: string, located: RegExp): void {
  const shown = `${what}\nexit ${o.code}\n--- stderr\n${o.stderr.slice(0, 3000)}`;
  expect([0, 1], shown).toContain(o.code);
  expect(o.stderr, shown).not.toMatch(/internal error/);
  expect(o.stderr, shown).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
  if (o.code === 1) expect(o.stderr, shown).toMatch(located);
}

// ---- .fsm sources ----------------------------------------------------------------------------------------

const HOSTILE_NUMBERS = ["0", "-1", "1e308 * 1e308", "99999999999999999999", "0.5", "1e-320", "-0", "NaN", "2"];
const PUNCTUATION = ["(", ")", "{", "}", ":", ",", "=", "@", ".", "[", "]", "\"", "//", "/*", "\u0000", "\u00e9"];

/** One random edit of the source text: a token deleted, doubled, renamed or swapped for a hostile number, a
 *  stray character, two lines swapped, or the file cut short. */
function mutateSource(src: string, r: () => number): string {
  const tokens = src.split(/(\s+|[(){}\[\]:,=@.])/).filter((t) => t !== "");
  const words = tokens.filter((t) => /^[A-Za-z_]\w*$/.test(t));
  const at = Math.floor(r() * tokens.length);
  switch (Math.floor(r() * 7)) {
    case 0: tokens.splice(at, 1); break;
    case 1: tokens.splice(at, 0, tokens[at]!); break;
    case 2: {
      const numbers = tokens.map((t, i) => (/^\d/.test(t) ? i : -1)).filter((i) => i >= 0);
      if (numbers.length > 0) tokens[pick(r, numbers)] = pick(r, HOSTILE_NUMBERS);
      break;
    }
    case 3: {
      const names = tokens.map((t, i) => (/^[A-Za-z_]\w*$/.test(t) ? i : -1)).filter((i) => i >= 0);
      tokens[pick(r, names)] = pick(r, words);
      break;
    }
    case 4: tokens.splice(at, 0, pick(r, PUNCTUATION)); break;
    case 5: {
      const lines = tokens.join("").split("\n");
      const i = Math.floor(r() * (lines.length - 1));
      [lines[i], lines[i + 1]] = [lines[i + 1]!, lines[i]!];
      return lines.join("\n");
    }
    default: return tokens.join("").slice(0, Math.floor(r() * src.length));
  }
  return tokens.join("");
}

// A source diagnostic names file:line:col; a refusal at compile time may instead name the setting or flag.
const SOURCE_LOCATED = /\.fsm:\d+:\d+: error|fsm (check|compile): error: /;

describe("fuzzed .fsm sources: fsm check, then fsm compile when they still check", () => {
  const samples = ["mlp.fsm", "gpt-tiny.fsm", "llama-7b.fsm"];
  const CASES = 80;
  for (const name of samples) {
    it(`${CASES} mutants of ${name}`, async () => {
      const src = readFileSync(sample(name), "utf8");
      const r = rng(name.length * 7919);
      let checked = 0;
      let refused = 0;
      for (let n = 0; n < CASES; n++) {
        const text = mutateSource(src, r);
        const file = join(work, `mutant-${name}`);
        writeFileSync(file, text);
        const o = await fsm("check", file);
        expectClean(o, `fsm check on mutant ${n} of ${name}:\n${text.slice(0, 2000)}`, SOURCE_LOCATED);
        // The diagnostics cap: never the hundreds of lines that random bytes used to give.
        expect(o.stderr.split("\n").filter((l) => / error(\[\w+\])?: /.test(l)).length).toBeLessThanOrEqual(20);
        if (o.code === 1) refused++;
        // The small models compile in well under a second: a mutant the checker accepts must compile or be
        // refused cleanly (a setting no cluster can meet), never crash the search.
        if (o.code === 0 && name !== "llama-7b.fsm") {
          checked++;
          const plan = join(work, "mutant.plan.json");
          const c = await fsm("compile", file, "--devices", "2", "-o", plan);
          expectClean(c, `fsm compile on mutant ${n} of ${name}:\n${text}`, SOURCE_LOCATED);
        }
      }
      // The mutations must exercise the error paths, and for the small models the compiler too.
      expect(refused).toBeGreaterThan(CASES / 4);
      if (name !== "llama-7b.fsm") expect(checked).toBeGreaterThan(0);
    }, 120_000);
  }
});

// ---- plans -----------------------------------------------------------------------------------------------

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Every path to a leaf or container in a JSON value, as key lists. */
function paths(v: Json, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
  else if (v !== null && typeof v === "object") for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out);
  return out;
}

/** One random edit at a random place in the plan: a number moved (±1, 0, -1, huge, fractional), a string
 *  changed, an array element dropped, doubled or two swapped, a key deleted. Returns the edit's description. */
function mutatePlan(plan: { [k: string]: Json }, r: () => number): string {
  const all = paths(plan).filter((p) => p.length > 0 && p[0] !== "hash");
  const p = pick(r, all);
  let parent: Json = plan;
  for (const k of p.slice(0, -1)) parent = (parent as Record<string | number, Json>)[k]!;
  const key = p[p.length - 1]!;
  const container = parent as Record<string | number, Json>;
  const value = container[key]!;
  const where = p.join(".");
  if (typeof value === "number") {
    const to = pick(r, [value + 1, value - 1, 0, -1, 2 ** 53 + 2, value + 0.5, 1e308]);
    container[key] = to;
    return `${where}: ${value} → ${to}`;
  }
  if (typeof value === "string") {
    container[key] = pick(r, ["", "x", value.slice(1), value + value]);
    return `${where}: string changed`;
  }
  if (Array.isArray(value) && value.length > 0) {
    const i = Math.floor(r() * value.length);
    const how = Math.floor(r() * 3);
    if (how === 0) value.splice(i, 1);
    else if (how === 1) value.splice(i, 0, structuredClone(value[i]!));
    else [value[0], value[i]] = [value[i]!, value[0]!];
    return `${where}: element ${i} ${["dropped", "doubled", "swapped with the first"][how]}`;
  }
  if (Array.isArray(parent)) parent.splice(key as number, 1);
  else delete container[key];
  return `${where}: removed`;
}

const PLAN_LOCATED = /\.plan\.json: error: invalid plan: (\$|[\w.[\]]+): |fsm (schedule|viz|explain|run): error: /;

describe("fuzzed plans: schedule, viz and run", () => {
  const good = join(work, "good.plan.json");
  let text = "";
  beforeAll(async () => {
    const o = await fsm("compile", sample("mlp.fsm"), "--devices", "2", "--set", "parallel.stages=2", "-o", good);
    expect(o.code, o.stderr).toBe(0);
    text = readFileSync(good, "utf8");
  }, 60_000);

  it("120 edited plans: the content hash refuses every one", async () => {
    const r = rng(17);
    for (let n = 0; n < 120; n++) {
      const plan = JSON.parse(text) as { [k: string]: Json };
      const edit = mutatePlan(plan, r);
      const file = join(work, "edited.plan.json");
      writeFileSync(file, JSON.stringify(plan));
      if (JSON.stringify(plan) === JSON.stringify(JSON.parse(text))) continue; // an edit that changed nothing
      const o = await fsm(...pick(r, [["schedule", file], ["viz", file, "--format", "text"], ["explain", file]]));
      expectClean(o, `edited plan (${edit})`, PLAN_LOCATED);
      // Fields outside the seal (the search's record) may change freely; everything else must be refused.
      if (!edit.startsWith("search")) expect(o.code, `edited plan (${edit}) was accepted`).toBe(1);
    }
  }, 120_000);

  it("120 re-sealed plans: refused with a JSON path, or accepted whole and then run cleanly", async () => {
    const r = rng(29);
    let accepted = 0;
    let refused = 0;
    for (let n = 0; n < 120; n++) {
      const plan = JSON.parse(text) as { [k: string]: Json };
      const edit = mutatePlan(plan, r);
      delete plan.hash;
      const file = join(work, "resealed.plan.json");
      writeFileSync(file, JSON.stringify(withHash(plan as never)));
      const o = await fsm("schedule", file);
      expectClean(o, `re-sealed plan (${edit})`, PLAN_LOCATED);
      if (o.code === 1) {
        refused++;
        continue;
      }
      // The loader accepted the edit: the plan must then be whole enough that every command that reads it
      // works or refuses it cleanly; running it is the strictest.
      accepted++;
      const before = new Set(filesUnder(work));
      for (const argv of [["viz", file, "--format", "text"], ["run", file, "--steps", "1"]]) {
        expectClean(await fsm(...argv), `re-sealed plan (${edit}), fsm ${argv[0]}`, PLAN_LOCATED);
      }
      expect(filesUnder(work).filter((f) => !before.has(f))).toEqual([]);
    }
    expect(refused).toBeGreaterThan(60);
    expect(accepted + refused).toBe(120);
  }, 240_000);
});

// ---- checkpoints -----------------------------------------------------------------------------------------

describe("fuzzed checkpoints: one flipped byte anywhere in a rank file", () => {
  const ck = join(work, "ck");
  let rankFile = "";
  beforeAll(async () => {
    const o = await fsm("run", sample("mlp.fsm"), "--devices", "2", "--steps", "1", "--save", ck);
    expect(o.code, o.stderr).toBe(0);
    const step = readdirSync(ck).find((d) => d.startsWith("step-"))!;
    rankFile = join(step, "rank-00001.safetensors");
  }, 60_000);

  it("40 flips, spread over header and data: every resume refuses with the file named", async () => {
    const bytes = readFileSync(join(ck, rankFile));
    const r = rng(5);
    for (let n = 0; n < 40; n++) {
      // Half in the header (its length, its JSON, its checksums), half in the tensors' bytes.
      const headerEnd = 8 + Number(bytes.readBigUInt64LE(0));
      const at = n % 2 === 0 ? Math.floor(r() * headerEnd) : headerEnd + Math.floor(r() * (bytes.length - headerEnd));
      const copy = join(work, `ck-${n}`);
      cpSync(ck, copy, { recursive: true });
      const flipped = Buffer.from(bytes);
      flipped[at]! ^= 0xff;
      writeFileSync(join(copy, rankFile), flipped);
      const o = await fsm("run", sample("mlp.fsm"), "--devices", "2", "--steps", "1", "--resume", copy);
      expectClean(o, `byte ${at} of ${rankFile} flipped`, /rank-00001\.safetensors/);
      expect(o.code, `byte ${at} of ${rankFile} flipped, and the resume went ahead:\n${o.stdout.slice(0, 500)}`).toBe(1);
      rmSync(copy, { recursive: true, force: true });
    }
  }, 240_000);
});
