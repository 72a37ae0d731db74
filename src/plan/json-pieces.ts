// JSON.stringify's text as a list of pieces instead of one string. A deep model's plan is longer than the
// longest string V8 makes (2^29 − 24 characters; gpt-tiny with 20,000 layers writes 475 MiB), and a plan
// written in pieces is stringified once for both its hash and its file, never built and flattened whole.

/** Short texts (brackets, commas, keys, small values) are gathered into pieces of about this many characters;
 *  a long one (a run of members, below) is a piece of its own as JSON.stringify made it, never copied into a
 *  larger string: hashing and writing read the pieces one by one, and joining them cost more than both. */
const PIECE_CHARS = 1 << 20;
const LONG_TEXT = 1 << 12;

/** Objects and arrays nearer the top than this are cut into their members; deeper ones only when they are
 *  long arrays (a plan's ops, tensors, actions and buffers), every other value being one JSON.stringify. */
const CUT_DEPTH = 3;
const LONG_ARRAY = 1024;

class Pieces {
  private short = "";

  constructor(private readonly sink: (piece: string) => void) {}

  add(text: string): void {
    if (text.length >= LONG_TEXT) {
      this.flush();
      this.sink(text);
      return;
    }
    this.short += text;
    if (this.short.length >= PIECE_CHARS) this.flush();
  }

  flush(): void {
    if (this.short !== "") this.sink(this.short);
    this.short = "";
  }
}

/** Members that JSON.stringify leaves out of an object (and writes as null in an array). */
const omitted = (v: unknown): boolean => v === undefined || typeof v === "function" || typeof v === "symbol";

const hasToJson = (value: object): boolean => typeof (value as { toJSON?: unknown }).toJSON === "function";

/** Whether `value` at `depth` is cut into its members rather than stringified whole. */
function cut(value: unknown, depth: number): value is object {
  return typeof value === "object" && value !== null && !hasToJson(value) && (depth < CUT_DEPTH || (Array.isArray(value) && value.length >= LONG_ARRAY));
}

/** Members of an array stringified by one JSON.stringify call (a run of members none of which is cut): a
 *  plan's hundreds of thousands of ops and tensors cost a few thousand calls and strings, not one each. */
const RUN = 256;

/** Whether an array member is stringified whole and the same inside a run as alone (JSON.stringify passes
 *  toJSON its index in a run, "" alone: such members stay alone). */
const plainMember = (v: unknown, depth: number): boolean => !cut(v, depth) && !(typeof v === "object" && v !== null && hasToJson(v));

function add(out: Pieces, value: unknown, depth: number): void {
  if (!cut(value, depth)) {
    out.add(omitted(value) ? "null" : JSON.stringify(value));
    return;
  }
  if (Array.isArray(value)) {
    out.add("[");
    for (let i = 0; i < value.length; ) {
      if (i > 0) out.add(",");
      let j = i;
      while (j < value.length && j - i < RUN && plainMember(value[j], depth + 1)) j++;
      if (j - i > 1) {
        // "[a,b,c]" without its brackets is the members' text joined by commas, as the array writes them.
        out.add(JSON.stringify(value.slice(i, j)).slice(1, -1));
        i = j;
      } else {
        add(out, value[i], depth + 1);
        i++;
      }
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

/** JSON.stringify(value)'s text (an object, array or JSON value), handed to `sink` in pieces, in order, as
 *  they are made: a writer or a hash takes each as it comes and the whole text is never held. */
export function writeJson(value: unknown, sink: (piece: string) => void, depth = 0): void {
  const out = new Pieces(sink);
  add(out, value, depth);
  out.flush();
}

/** JSON.stringify(value) (an object, array or JSON value), in pieces that concatenate to its text. */
export function jsonPieces(value: unknown, depth = 0): string[] {
  const pieces: string[] = [];
  writeJson(value, (p) => pieces.push(p), depth);
  return pieces;
}

/** The members JSON.stringify writes of an object after a first one (each `,"key":value`), in its order,
 *  each member's pieces to the sink `sinkOf` gives for its key. */
export function writeLaterMembers(value: Readonly<Record<string, unknown>>, sinkOf: (key: string) => (piece: string) => void): void {
  for (const [key, v] of Object.entries(value)) {
    if (omitted(v)) continue;
    const out = new Pieces(sinkOf(key));
    out.add(`,${JSON.stringify(key)}:`);
    add(out, v, 1);
    out.flush();
  }
}
