// AST of a .fsm file: discriminated unions, every node has a span. Produced by the CST→AST visitor;
// consumed by src/check. The parser never throws on user input: syntax errors become diagnostics and the
// AST holds whatever could be recovered (nodes may be missing, never malformed).
import type { Span } from "../diagnostics/span.js";

export interface Ident {
  readonly kind: "Ident";
  readonly name: string;
  readonly span: Span;
}

// ---------- expressions ----------

export type Expr =
  | NumberLit
  | StringLit
  | BoolLit
  | AutoLit
  | NameRef
  | MemberExpr
  | IndexExpr
  | CallExpr
  | UnaryExpr
  | BinaryExpr
  | TupleExpr
  | ListExpr;

export interface NumberLit {
  readonly kind: "Number";
  readonly value: number;
  /** True when written without '.', 'e' or 'E' (so `4` is an int and `4.0` a float). */
  readonly isInt: boolean;
  /** Source text, e.g. "6e-4" or "50_257". */
  readonly text: string;
  readonly span: Span;
}
export interface StringLit {
  readonly kind: "String";
  readonly value: string;
  readonly span: Span;
}
export interface BoolLit {
  readonly kind: "Bool";
  readonly value: boolean;
  readonly span: Span;
}
/** The keyword `auto` (a parallel setting left for the planner). */
export interface AutoLit {
  readonly kind: "Auto";
  readonly span: Span;
}
/** A bare name: constant, member, local tensor, loop variable, symbolic dim (B, S), enum word (gelu, fsdp), or a
 * word starting with digits such as `1f1b` (lexed as one name). */
export interface NameRef {
  readonly kind: "Name";
  readonly name: string;
  readonly span: Span;
}
/** `object.property`, e.g. `wte.weight`. */
export interface MemberExpr {
  readonly kind: "Member";
  readonly object: Expr;
  readonly property: Ident;
  readonly span: Span;
}
/** `object[index]`, e.g. `layers[3]`. */
export interface IndexExpr {
  readonly kind: "Index";
  readonly object: Expr;
  readonly index: Expr;
  readonly span: Span;
}
export interface Arg {
  /** Present for keyword arguments `name: value`. */
  readonly name?: Ident;
  readonly value: Expr;
  readonly span: Span;
}
/** `callee(args)`: an op, a block instance, a member call, or an optimizer/data constructor in settings. */
export interface CallExpr {
  readonly kind: "Call";
  readonly callee: Expr;
  readonly args: readonly Arg[];
  readonly span: Span;
}
export interface UnaryExpr {
  readonly kind: "Unary";
  readonly op: "-" | "+";
  readonly operand: Expr;
  readonly span: Span;
}
export type BinaryOp = "+" | "-" | "*" | "/" | "%";
export interface BinaryExpr {
  readonly kind: "Binary";
  readonly op: BinaryOp;
  readonly left: Expr;
  readonly right: Expr;
  readonly span: Span;
}
/** `(a, b)` — two or more items; `(a)` is just `a`. */
export interface TupleExpr {
  readonly kind: "Tuple";
  readonly items: readonly Expr[];
  readonly span: Span;
}
/** `[a, b, c]`, possibly empty. */
export interface ListExpr {
  readonly kind: "List";
  readonly items: readonly Expr[];
  readonly span: Span;
}

// ---------- declarations ----------

/** `@name` or `@name(args)` before a block, model or member declaration. */
export interface Annotation {
  readonly kind: "Annotation";
  readonly name: Ident;
  readonly args: readonly Arg[];
  readonly span: Span;
}

/** One binding of `const a = 1, b = 2 * a` (a const statement with several bindings yields several nodes). */
export interface ConstDecl {
  readonly kind: "Const";
  readonly name: Ident;
  readonly value: Expr;
  readonly span: Span;
}

/** A block parameter `d: int` or `hidden: int = 4 * d` (defaults may refer to earlier parameters). */
export interface Param {
  readonly kind: "Param";
  readonly name: Ident;
  /** `int`, `float`, `bool`, `str`. Missing when the source omitted it (recovered). */
  readonly type?: Ident;
  readonly default?: Expr;
  readonly span: Span;
}

/** `name = linear(d, 4 * d)` or `layers = repeat(n) as i Block(d: d, idx: i)`. */
export interface MemberDecl {
  readonly kind: "Member";
  readonly annotations: readonly Annotation[];
  readonly name: Ident;
  /** The op or block instantiated (callee is a Name in valid programs). */
  readonly init: CallExpr;
  /** Present for `repeat(count) [as index]` members. */
  readonly repeat?: { readonly count: Expr; readonly index?: Ident; readonly span: Span };
  readonly span: Span;
}

/** A tensor type `i32[B, S]` (dims are expressions: constants, symbolic B/S, arithmetic). */
export interface TensorType {
  readonly kind: "TensorType";
  readonly dtype: Ident;
  readonly dims: readonly Expr[];
  readonly span: Span;
}

/** A forward input: typed in models (`tokens: i32[B, S]`), untyped in blocks (`x`). */
export interface Input {
  readonly kind: "Input";
  readonly name: Ident;
  readonly type?: TensorType;
  readonly span: Span;
}

export type Stmt = AssignStmt | ReturnStmt | ForStmt;
/** `h = expr` (rebinding a local is allowed; it shadows the previous value). */
export interface AssignStmt {
  readonly kind: "Assign";
  readonly target: Ident;
  readonly value: Expr;
  readonly span: Span;
}
export interface ReturnStmt {
  readonly kind: "Return";
  readonly value: Expr;
  readonly span: Span;
}
/** `for layer in layers { ... }` over a repeat member. */
export interface ForStmt {
  readonly kind: "For";
  readonly variable: Ident;
  readonly iterable: Expr;
  readonly body: readonly Stmt[];
  readonly span: Span;
}

export interface ForwardDecl {
  readonly kind: "Forward";
  readonly inputs: readonly Input[];
  readonly body: readonly Stmt[];
  readonly span: Span;
}

/** Items allowed inside a block or model body, in source order. */
export type BodyItem = ConstDecl | MemberDecl | ForwardDecl;

export interface BlockDecl {
  readonly kind: "Block";
  readonly annotations: readonly Annotation[];
  readonly name: Ident;
  readonly params: readonly Param[];
  readonly body: readonly BodyItem[];
  readonly span: Span;
}

export interface ModelDecl {
  readonly kind: "Model";
  readonly annotations: readonly Annotation[];
  readonly name: Ident;
  readonly body: readonly BodyItem[];
  readonly span: Span;
}

/** `key = value` inside a train or parallel section. */
export interface Setting {
  readonly kind: "Setting";
  readonly key: Ident;
  readonly value: Expr;
  readonly span: Span;
}

export interface SettingsSection {
  readonly kind: "Train" | "Parallel";
  /** The `train` / `parallel` keyword. */
  readonly keyword: Ident;
  readonly settings: readonly Setting[];
  readonly span: Span;
}

export interface ImportDecl {
  readonly kind: "Import";
  readonly path: StringLit;
  readonly span: Span;
}

export type TopItem = ImportDecl | ConstDecl | BlockDecl | ModelDecl | SettingsSection;

export interface FileAst {
  readonly kind: "File";
  readonly file: string;
  readonly items: readonly TopItem[];
  readonly span: Span;
}
