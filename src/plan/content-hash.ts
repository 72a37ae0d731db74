// The plan file's content hash: a seal over everything that decides what runs, so that a hand edit the
// consistency checks cannot see (a seed, a byte count, a buffer offset) is still refused, with a message
// saying the plan was edited after compile. It is a property of the file: planToJson writes it, the loader
// checks it and hands on the plan without it. The search report is left out, as the processes of one run
// leave it out when they compare their plans (runtime/run-loop.ts): it says how the plan was chosen.
import { createHash } from "node:crypto";
import { fail } from "./json-check.js";
import { jsonPieces, memberPieces, objectPieces } from "./json-pieces.js";
import type { Plan } from "./plan.js";

/** Plan versions from this one on carry `hash`; older plans (version 1) predate it and load without. */
export const HASHED_SINCE_VERSION = 2;

/** `sha256:` and the hex digest of the plan's JSON (key order as written) without `hash` and `search`. */
export function planHash(plan: Plan | Readonly<Record<string, unknown>>): string {
  const { hash: _hash, search: _search, ...sealed } = plan as Readonly<Record<string, unknown>>;
  return digest(jsonPieces(sealed));
}

function digest(pieces: readonly string[]): string {
  const hash = createHash("sha256");
  for (const p of pieces) hash.update(p);
  return `sha256:${hash.digest("hex")}`;
}

/** The plan as written, with its hash right after the version (read before the large sections). */
export function withHash(plan: Plan): Readonly<Record<string, unknown>> {
  const { format, version, hash: _stale, ...rest } = plan as Plan & { hash?: string };
  const sealed = { format, version, ...rest };
  return { format, version, hash: planHash(sealed), ...rest };
}

/** JSON.stringify(withHash(plan)) in pieces (json-pieces.ts): each section stringified once, for the hash
 *  and the file alike. */
export function withHashPieces(plan: Plan): string[] {
  const { format, version, hash: _stale, ...rest } = plan as Plan & { hash?: string };
  const head = memberPieces({ format, version });
  const body = memberPieces(rest);
  const hash = digest(objectPieces([...head, ...body.filter(([key]) => key !== "search")]));
  return objectPieces([...head, ["hash", [JSON.stringify(hash)]], ...body]);
}

/** Checks the hash of a parsed plan (after every other check) and returns the plan without it. */
export function verifyHash(parsed: Readonly<Record<string, unknown>>, plan: Plan): Plan {
  const { hash, ...rest } = parsed;
  // A file that carries a hash is held to it whatever its version says, so that lowering the version of an
  // edited plan does not skip the seal; only a version-1 file without one (written before hashes) loads
  // unsealed, and the consistency checks before this one still prove it complete.
  if (hash === undefined && plan.version < HASHED_SINCE_VERSION) return rest as unknown as Plan;
  if (hash === undefined) fail("hash", `missing: every version-${plan.version} plan carries the content hash fsm compile wrote; compile the plan again (fsm compile ${plan.model.source} ... -o FILE)`);
  if (typeof hash !== "string" || !/^sha256:[0-9a-f]{64}$/.test(hash)) fail("hash", `expected "sha256:" and 64 hex digits, got ${JSON.stringify(hash)?.slice(0, 80)}`);
  if (hash !== planHash(parsed)) {
    fail("hash", `the plan was edited after compile (its content no longer matches its hash): compile it again from ${plan.model.source} (fsm compile ${plan.model.source} ... -o FILE) rather than editing it`);
  }
  return rest as unknown as Plan;
}
