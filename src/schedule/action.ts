// The schedule action IR: one tiny immutable action per step of a rank, and its exact text form.
//
// Text grammar (canonical: `formatAction(parseAction(t)) === t` for every accepted `t`, and
// `parseAction(formatAction(a))` equals `a` for every valid action):
//
//   action := STAGE KIND [MB] ["u" UNIT] ["@" PEER]
//   STAGE, MB, UNIT, PEER := "0" | [1-9][0-9]*          (no leading zeros, safe integers)
//   KIND := compute | p2p | shard
//   compute := "F" | "B" | "I" | "W" | "R"                   MB required, no UNIT, no PEER
//   p2p     := "SEND_F" | "RECV_F" | "SEND_B" | "RECV_B"     MB and PEER required, no UNIT
//   shard   := "ALL_GATHER" | "REDUCE_SCATTER" | "ALL_REDUCE" | "OPTIMIZER" | "FREE"
//                                                            MB and UNIT optional, no PEER
//            | "BROADCAST" | "REDUCE"                        MB and UNIT optional, PEER (the root) required
//
// Examples: `1F3` stage 1 forward of micro-batch 3; `1I3`/`1W3` the input-/weight-gradient halves of its
// split backward; `1R3` its recompute; `2SEND_F3@3` stage 2 sends micro-batch 3's activation to rank 3;
// `3RECV_F3@2` stage 3 receives it from rank 2; `0ALL_GATHER2u1` gathers FSDP unit 1 of stage 0 for
// micro-batch 2; `0BROADCASTu4@2` broadcasts unit 4 from root rank 2.
//
// STAGE is a virtual stage (interleaved schedules put several on one rank). For SEND_F/SEND_B it is the
// sending stage and for RECV_F/RECV_B the receiving stage, so `sSEND_Fm` pairs with `(s+1)RECV_Fm` and
// `sSEND_Bm` with `(s-1)RECV_Bm`, as in torch.distributed.pipelining. PEER is a rank, not a stage, so an
// action list is self-contained: the runtime needs no placement table to know whom to talk to.

export const COMPUTE_KINDS = ["F", "B", "I", "W", "R"] as const;
export const P2P_KINDS = ["SEND_F", "RECV_F", "SEND_B", "RECV_B"] as const;
/**
 * The sharding work's actions (FSDP/OSS/ShardedDDP): orders and lowering never produce them, the plan
 * inserts them into a lowered schedule (edit.ts). The collectives among them rendezvous with a group of
 * ranks; OPTIMIZER and FREE are local (lowered.ts has the rules).
 */
export const SHARD_KINDS = ["ALL_GATHER", "REDUCE_SCATTER", "ALL_REDUCE", "BROADCAST", "REDUCE", "OPTIMIZER", "FREE"] as const;
export const COLLECTIVE_KINDS = ["ALL_GATHER", "REDUCE_SCATTER", "ALL_REDUCE", "BROADCAST", "REDUCE"] as const;

export type ComputeKind = (typeof COMPUTE_KINDS)[number];
export type P2PKind = (typeof P2P_KINDS)[number];
export type ShardKind = (typeof SHARD_KINDS)[number];
export type CollectiveActionKind = (typeof COLLECTIVE_KINDS)[number];
export type ActionKind = ComputeKind | P2PKind | ShardKind;

export interface Action {
  readonly kind: ActionKind;
  /** Virtual stage index. */
  readonly stage: number;
  /** Micro-batch index; always present on compute and p2p actions. */
  readonly mb?: number;
  /** Shard unit (FSDP unit or gradient bucket) of a shard action. */
  readonly unit?: number;
  /** The other rank of a p2p action; the root rank of BROADCAST/REDUCE. */
  readonly peer?: number;
}

const computeSet: ReadonlySet<string> = new Set(COMPUTE_KINDS);
const p2pSet: ReadonlySet<string> = new Set(P2P_KINDS);
const collectiveSet: ReadonlySet<string> = new Set(COLLECTIVE_KINDS);

export function isComputeKind(k: ActionKind): k is ComputeKind {
  return computeSet.has(k);
}

export function isP2PKind(k: ActionKind): k is P2PKind {
  return p2pSet.has(k);
}

export function isShardKind(k: ActionKind): k is ShardKind {
  return !computeSet.has(k) && !p2pSet.has(k);
}

export function isCollectiveKind(k: ActionKind): k is CollectiveActionKind {
  return collectiveSet.has(k);
}

/** Which optional fields a kind requires ("req"), allows ("opt") or forbids ("no"). */
interface FieldRules {
  readonly mb: Need;
  readonly unit: Need;
  readonly peer: Need;
}
const RULES = new Map<string, FieldRules>([
  ...COMPUTE_KINDS.map((k) => [k, { mb: "req", unit: "no", peer: "no" }] as const),
  ...P2P_KINDS.map((k) => [k, { mb: "req", unit: "no", peer: "req" }] as const),
  ...SHARD_KINDS.map((k) => [k, { mb: "opt", unit: "opt", peer: k === "BROADCAST" || k === "REDUCE" ? "req" : "no" }] as const),
]);
type Need = "req" | "opt" | "no";
type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type Field = "mb" | "unit" | "peer";

const isIndex = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0;

/** Why `a` is not a well-formed action, or undefined when it is. Validation calls it on every action. */
export function actionShapeError(a: Action): string | undefined {
  const rules = RULES.get(a.kind);
  if (!rules) return `unknown action kind ${JSON.stringify(a.kind)}`;
  if (!isIndex(a.stage)) return `stage must be a non-negative integer, got ${a.stage}`;
  // Each field by name: a lookup by a variable key is slow on the hot path.
  return fieldError(a.kind, "mb", a.mb, rules.mb) ?? fieldError(a.kind, "unit", a.unit, rules.unit) ?? fieldError(a.kind, "peer", a.peer, rules.peer);
}

function fieldError(kind: ActionKind, field: Field, v: number | undefined, need: Need): string | undefined {
  if (v === undefined) return need === "req" ? `${kind} needs ${field}` : undefined;
  if (need === "no") return `${kind} takes no ${field}`;
  return isIndex(v) ? undefined : `${field} must be a non-negative integer, got ${v}`;
}

/** A frozen action with only the fields that are set; throws on a malformed one (an internal bug). */
export function makeAction(fields: Action): Action {
  const err = actionShapeError(fields);
  if (err) throw new Error(`invalid action: ${err}`);
  const a: Mutable<Action> = { kind: fields.kind, stage: fields.stage };
  if (fields.mb !== undefined) a.mb = fields.mb;
  if (fields.unit !== undefined) a.unit = fields.unit;
  if (fields.peer !== undefined) a.peer = fields.peer;
  return Object.freeze(a);
}

// The two constructors schedules call most skip the generic field walk; the checks are the same.
export function computeAction(kind: ComputeKind, stage: number, mb: number): Action {
  if (!computeSet.has(kind) || !isIndex(stage) || !isIndex(mb)) return makeAction({ kind, stage, mb });
  return Object.freeze({ kind, stage, mb });
}

export function p2pAction(kind: P2PKind, stage: number, mb: number, peer: number): Action {
  if (!p2pSet.has(kind) || !isIndex(stage) || !isIndex(mb) || !isIndex(peer)) return makeAction({ kind, stage, mb, peer });
  return Object.freeze({ kind, stage, mb, peer });
}

export function shardAction(kind: ShardKind, stage: number, fields: { mb?: number; unit?: number; peer?: number } = {}): Action {
  return makeAction({ kind, stage, ...fields });
}

export function formatAction(a: Action): string {
  let s = `${a.stage}${a.kind}`;
  if (a.mb !== undefined) s += a.mb;
  if (a.unit !== undefined) s += `u${a.unit}`;
  if (a.peer !== undefined) s += `@${a.peer}`;
  return s;
}

const NUM = "(0|[1-9][0-9]*)";
const TEXT_RE = new RegExp(`^${NUM}([A-Z]+(?:_[A-Z]+)*)${NUM}?(?:u${NUM})?(?:@${NUM})?$`);

export type ParsedAction = { readonly ok: true; readonly action: Action } | { readonly ok: false; readonly message: string };

/** Parses the text form; text that is not canonical (leading zeros, stray fields) is rejected with a reason. */
export function parseAction(text: string): ParsedAction {
  const m = TEXT_RE.exec(text);
  if (!m) return { ok: false, message: `${JSON.stringify(text)} is not an action (expected e.g. 1F3, 2SEND_F3@3)` };
  const [, stage, kind, mb, unit, peer] = m;
  if (!RULES.has(kind!)) return { ok: false, message: `${JSON.stringify(text)}: unknown action kind ${kind}` };
  const a: Mutable<Action> = { kind: kind as ActionKind, stage: Number(stage) };
  if (mb !== undefined) a.mb = Number(mb);
  if (unit !== undefined) a.unit = Number(unit);
  if (peer !== undefined) a.peer = Number(peer);
  const err = actionShapeError(a);
  if (err) return { ok: false, message: `${JSON.stringify(text)}: ${err}` };
  return { ok: true, action: makeAction(a) };
}

/** parseAction for text the program wrote itself (tests, fixtures): throws instead of returning a reason. */
export function actionFromText(text: string): Action {
  const r = parseAction(text);
  if (!r.ok) throw new Error(r.message);
  return r.action;
}
