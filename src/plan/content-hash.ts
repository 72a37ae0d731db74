// The plan file's content hash: a seal over everything that decides what runs, so that a hand edit the
// consistency checks cannot see (a seed, a byte count, a buffer offset) is still refused, with a message
// saying the plan was edited after compile. It is a property of the file: planToJson writes it, the loader
// checks it and hands on the plan without it. The search report is left out, as the processes of one run
// leave it out when they compare their plans (runtime/run-loop.ts): it says how the plan was chosen.
import { createHash } from "node:crypto";
import { fail } from "./json-check.js";
import { writeJson, writeLaterMembers } from "./json-pieces.js";
import type { Plan } from "./plan.js";

/** Plan versions from this one on carry `hash`; older plans (version 1) predate it and load without. */
export const HASHED_SINCE_VERSION = 2;

/** `sha256:` and the hex digest of the plan's JSON (key order as written) without `hash` and `search`. */
export function planHash(plan: Plan | Readonly<Record<string, unknown>>): string {
  const { hash: _hash, search: _search, ...sealed } = plan as Readonly<Record<string, unknown>>;
  const hash = createHash("sha256");
  writeJson(sealed, (p) => hash.update(p));
  return `sha256:${hash.digest("hex")}`;
}

/** The plan as written, with its hash right after the version (read before the large sections). */
export function withHash(plan: Plan): Readonly<Record<string, unknown>> {
  const { format, version, hash: _stale, ...rest } = plan as Plan & { hash?: string };
  const sealed = { format, version, ...rest };
  return { format, version, hash: planHash(sealed), ...rest };
}

/** The text of withHash(plan) before its later members: `{"format":…,"version":…,"hash":"sha256:…"`. Its
 *  length does not depend on the digest (64 hex digits), so a writer can leave room for it. */
export function sealedHead(plan: Plan, digestHex: string): string {
  return `{"format":${JSON.stringify(plan.format)},"version":${JSON.stringify(plan.version)},"hash":${JSON.stringify(`sha256:${digestHex}`)}`;
}

/** JSON.stringify(withHash(plan)), streamed: the text after the hash (every other member and the closing
 *  brace) goes to `body` in pieces as each section is stringified, once for the hash and the file alike, and
 *  the head before it (sealedHead) is returned once the hash is known. A deep model's plan is longer than
 *  the longest string V8 makes, and is never held whole. */
export function writeSealed(plan: Plan, body: (piece: string) => void): string {
  const { format: _format, version: _version, hash: _stale, ...rest } = plan as Plan & { hash?: string };
  const hash = createHash("sha256");
  // The hashed text is the plan's without `hash` and `search`: the head without its hash member, then the
  // same members.
  hash.update(`{"format":${JSON.stringify(plan.format)},"version":${JSON.stringify(plan.version)}`);
  const sealed = (p: string): void => {
    hash.update(p);
    body(p);
  };
  writeLaterMembers(rest, (key) => (key === "search" ? body : sealed));
  sealed("}");
  return sealedHead(plan, hash.digest("hex"));
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
