// JSON.stringify's text as a list of pieces instead of one string. A deep model's plan is longer than the
// longest string V8 makes (2^29 − 24 characters; gpt-tiny with 20,000 layers writes 475 MiB), and a plan
// written in pieces is stringified once for both its hash and its file, never built and flattened whole.

/** Pieces are joined up to about this many characters before a new one starts: few pieces, none too long. */
const PIECE_CHARS = 1 << 20;

/** Objects and arrays nearer the top than this are cut into their members; deeper ones only when they are
 *  long arrays (a plan's ops, tensors, actions and buffers), every other value being one JSON.stringify. */
const CUT_DEPTH = 3;
const LONG_ARRAY = 1024;

class Pieces {
  readonly done: string[] = [];
  private current = "";

  add(text: string): void {
    this.current += text;
    if (this.current.length >= PIECE_CHARS) this.flush();
  }

  flush(): string[] {
    if (this.current !== "") this.done.push(this.current);
    this.current = "";
    return this.done;
  }
}

/** Members that JSON.stringify leaves out of an object (and writes as null in an array). */
const omitted = (v: unknown): boolean => v === undefined || typeof v === "function" || typeof v === "symbol";

function add(out: Pieces, value: unknown, depth: number): void {
  const cut = typeof value === "object" && value !== null && typeof (value as { toJSON?: unknown }).toJSON !== "function" && (depth < CUT_DEPTH || (Array.isArray(value) && value.length >= LONG_ARRAY));
  if (!cut) {
    out.add(omitted(value) ? "null" : JSON.stringify(value));
    return;
  }
  if (Array.isArray(value)) {
    out.add("[");
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.add(",");
      add(out, value[i], depth + 1);
    }
    out.add("]");
    return;
  }
  out.add("{");
  let first = true;
  for (const [key, v] of Object.entries(value)) {
    if (omitted(v)) continue;
    out.add(`${first ? "" : ","}${JSON.stringify(key)}:`);
    first = false;
    add(out, v, depth + 1);
  }
  out.add("}");
}

/** JSON.stringify(value) (an object, array or JSON value), in pieces that concatenate to its text. */
export function jsonPieces(value: unknown, depth = 0): string[] {
  const out = new Pieces();
  add(out, value, depth);
  return out.flush();
}

/** An object's text from its members' texts (each a key and its value's pieces), in the order given. */
export function objectPieces(members: readonly (readonly [string, readonly string[]])[]): string[] {
  const out: string[] = ["{"];
  members.forEach(([key, value], i) => {
    out.push(`${i > 0 ? "," : ""}${JSON.stringify(key)}:`);
    for (const p of value) out.push(p);
  });
  out.push("}");
  return out;
}

/** The members JSON.stringify writes of an object, in its order, each value's text in pieces. */
export function memberPieces(value: Readonly<Record<string, unknown>>): [string, string[]][] {
  return Object.entries(value).filter(([, v]) => !omitted(v)).map(([key, v]) => [key, jsonPieces(v, 1)]);
}
