// Dimensions and shapes: a dimension is a monomial coef·B^i·S^j over the symbolic dims (batch B, sequence S),
// so `reshape(x, [B * S, d])` and `d / heads` stay exact without knowing the batch size at compile time.

export const SYMBOLIC_DIMS = ["B", "S"] as const;
export type SymbolName = (typeof SYMBOLIC_DIMS)[number];

/** coef × Π sym^power. Concrete dims have no symbols. Invariant: powers > 0, coef a positive integer. */
export interface Dim {
  readonly coef: number;
  readonly syms: Readonly<Partial<Record<SymbolName, number>>>;
}

export type Shape = readonly Dim[];

export function dim(n: number): Dim {
  return { coef: n, syms: {} };
}

export function symDim(name: SymbolName): Dim {
  return { coef: 1, syms: { [name]: 1 } };
}

export function isConcrete(d: Dim): boolean {
  // A key loop, not Object.keys: called for every dimension of every tensor a plan writes or costs.
  for (const _ in d.syms) return false;
  return true;
}

export function dimMul(a: Dim, b: Dim): Dim {
  const syms: Partial<Record<SymbolName, number>> = { ...a.syms };
  for (const s of SYMBOLIC_DIMS) {
    const p = b.syms[s];
    if (p) syms[s] = (syms[s] ?? 0) + p;
  }
  return { coef: a.coef * b.coef, syms };
}

/** Exact division a / b, or undefined when it is not a whole monomial (e.g. 7/2, or B/S). */
export function dimDiv(a: Dim, b: Dim): Dim | undefined {
  if (b.coef === 0 || a.coef % b.coef !== 0) return undefined;
  const syms: Partial<Record<SymbolName, number>> = {};
  for (const s of SYMBOLIC_DIMS) {
    const p = (a.syms[s] ?? 0) - (b.syms[s] ?? 0);
    if (p < 0) return undefined;
    if (p > 0) syms[s] = p;
  }
  return { coef: a.coef / b.coef, syms };
}

export function dimEq(a: Dim, b: Dim): boolean {
  return a.coef === b.coef && SYMBOLIC_DIMS.every((s) => (a.syms[s] ?? 0) === (b.syms[s] ?? 0));
}

export function shapeEq(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => dimEq(d, b[i]!));
}

/** `768`, `B`, `B*S`, `4*S^2`: the stable text form used by printers and messages. */
export function dimToString(d: Dim): string {
  let text = d.coef !== 1 || isConcrete(d) ? String(d.coef) : "";
  for (const s of SYMBOLIC_DIMS) {
    const p = d.syms[s];
    if (!p) continue;
    const part = p === 1 ? s : `${s}^${p}`;
    text = text === "" ? part : `${text}*${part}`;
  }
  return text;
}

export function shapeToString(s: Shape): string {
  return `[${s.map(dimToString).join(", ")}]`;
}

/** Substitutes symbol values (e.g. {B: 8, S: 1024}); throws on an unbound symbol (an internal error: callers bind all). */
export function evalDim(d: Dim, bindings: Readonly<Partial<Record<SymbolName, number>>>): number {
  let v = d.coef;
  for (const s of SYMBOLIC_DIMS) {
    const p = d.syms[s];
    if (!p) continue;
    const b = bindings[s];
    if (b === undefined) throw new Error(`internal: symbolic dimension ${s} is unbound`);
    v *= b ** p;
  }
  return v;
}

/** Number of elements as a Dim (product of all dims); the empty shape (a scalar) has one element. */
export function numelDim(s: Shape): Dim {
  // dimMul folded over the shape without a Dim per step (the cost model asks for every tensor's size at
  // every micro-batch size): the same coefficient product, in the same order, and the same powers.
  let coef = 1;
  let syms: Partial<Record<SymbolName, number>> | undefined;
  for (const d of s) {
    coef *= d.coef;
    for (const name of SYMBOLIC_DIMS) {
      const p = d.syms[name];
      if (!p) continue;
      syms ??= {};
      syms[name] = (syms[name] ?? 0) + p;
    }
  }
  return { coef, syms: syms ?? {} };
}

/** Element count of a concrete shape; throws if symbolic (parameters are always concrete). */
export function numel(s: Shape): number {
  const coef = numelParts(s);
  if (powers.some((p) => p > 0)) throw new Error(`internal: numel of symbolic shape ${shapeToString(s)}`);
  return coef;
}

/** evalDim(numelDim(s), bindings) without the Dim: the search and the cost model size every tensor at every
 *  micro-batch size they try. The same products in the same order, so the same number. */
export function numelAt(s: Shape, bindings: Readonly<Partial<Record<SymbolName, number>>>): number {
  let v = numelParts(s);
  for (let i = 0; i < SYMBOLIC_DIMS.length; i++) {
    const p = powers[i]!;
    if (!p) continue;
    const b = bindings[SYMBOLIC_DIMS[i]!];
    if (b === undefined) throw new Error(`internal: symbolic dimension ${SYMBOLIC_DIMS[i]} is unbound`);
    v *= b ** p;
  }
  return v;
}

/** Each symbol's power in a shape's element count, by SYMBOLIC_DIMS index: numelParts' scratch output. */
const powers = SYMBOLIC_DIMS.map(() => 0);

/** numelDim's coefficient, with its symbols' powers left in `powers`. */
function numelParts(s: Shape): number {
  let coef = 1;
  powers.fill(0);
  for (const d of s) {
    coef *= d.coef;
    for (let i = 0; i < SYMBOLIC_DIMS.length; i++) {
      const p = d.syms[SYMBOLIC_DIMS[i]!];
      if (p) powers[i]! += p;
    }
  }
  return coef;
}
