// Owns the CST → AST walk: builds src/parse/ast.ts nodes with spans, tolerating the partial CSTs of error recovery.
import type { CstElement, CstNode, IToken } from "chevrotain";
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import type * as A from "./ast.js";
import { literalValue } from "./number-literal.js";
import { UnterminatedString, BadNumber, LineMap, decodeString, isRealToken, tokenEnd } from "./tokens.js";

// Recovery can leave any child missing and can insert tokens with NaN offsets, so every accessor returns undefined
// for what is absent or not really in the source, and every builder returns undefined (dropping the node) when a
// required part is missing. Nothing here may throw on a CST that chevrotain produced.

type Part = IToken | { readonly span: Span } | undefined;

function isCstNode(e: CstElement | undefined): e is CstNode {
  return e !== undefined && (e as CstNode).children !== undefined && typeof (e as CstNode).name === "string";
}

/** The i-th sub-rule node under key, if present. */
function child(node: CstNode | undefined, key: string, i = 0): CstNode | undefined {
  const e = node?.children[key]?.[i];
  return isCstNode(e) ? e : undefined;
}

/** All sub-rule nodes under key, in source order. */
function children(node: CstNode | undefined, key: string): CstNode[] {
  return (node?.children[key] ?? []).filter(isCstNode);
}

/** The i-th token under key if it is really in the source (recovery-inserted tokens count as missing). */
function token(node: CstNode | undefined, key: string, i = 0): IToken | undefined {
  const e = node?.children[key]?.[i];
  return e !== undefined && !isCstNode(e) && isRealToken(e) ? e : undefined;
}

export interface BuildResult {
  readonly ast: A.FileAst;
  /** FSM120 for number literals that do not denote their number (`1e999`, `9007199254740993`). */
  readonly diagnostics: Diagnostic[];
}

/** Builds the FileAst of one parsed file. `cst` may be undefined or partial. */
export function cstToAst(cst: CstNode | undefined, lines: LineMap): BuildResult {
  const b = new Builder(lines);
  const items = b.file(cst);
  const ast: A.FileAst = { kind: "File", file: lines.file, items, span: lines.span(0, lines.text.length) };
  return { ast, diagnostics: b.diagnostics };
}

class Builder {
  readonly diagnostics: Diagnostic[] = [];
  constructor(private readonly lines: LineMap) {}

  // ---------- spans ----------

  /** Span from the earliest to the latest present part; undefined when no part is present. */
  private span(...parts: Part[]): Span | undefined {
    let start = Infinity;
    let end = -Infinity;
    for (const p of parts) {
      if (p === undefined) continue;
      let s: number;
      let e: number;
      if ("span" in p) {
        s = p.span.start;
        e = p.span.end;
      } else {
        if (!isRealToken(p)) continue;
        s = p.startOffset;
        e = tokenEnd(p);
      }
      if (s < start) start = s;
      if (e > end) end = e;
    }
    return Number.isFinite(start) && Number.isFinite(end) ? this.lines.span(start, end) : undefined;
  }

  private tokenSpan(t: IToken): Span {
    return this.lines.span(t.startOffset, tokenEnd(t));
  }

  private ident(t: IToken | undefined): A.Ident | undefined {
    if (!isRealToken(t) || t.image === "") return undefined;
    return { kind: "Ident", name: t.image, span: this.tokenSpan(t) };
  }

  // ---------- top level ----------

  file(cst: CstNode | undefined): A.TopItem[] {
    const items: A.TopItem[] = [];
    for (const top of children(cst, "topItem")) {
      const imp = child(top, "importDecl");
      if (imp) push(items, this.importDecl(imp));
      const cd = child(top, "constDecl");
      if (cd) items.push(...this.constDecl(cd));
      const decl = child(top, "declaration");
      if (decl) push(items, this.declaration(decl));
      const train = child(top, "trainSection");
      if (train) push(items, this.section(train, "Train", "Train"));
      const par = child(top, "parallelSection");
      if (par) push(items, this.section(par, "Parallel", "Parallel"));
    }
    return items;
  }

  private importDecl(node: CstNode): A.ImportDecl | undefined {
    const kw = token(node, "Import");
    const path = this.stringLit(token(node, "String"));
    const span = this.span(kw, path);
    return path && span ? { kind: "Import", path, span } : undefined;
  }

  private constDecl(node: CstNode): A.ConstDecl[] {
    const out: A.ConstDecl[] = [];
    for (const bnd of children(node, "binding")) {
      const name = this.ident(token(bnd, "Name"));
      const value = this.expression(child(bnd, "expression"));
      const span = this.span(name, value);
      if (name && value && span) out.push({ kind: "Const", name, value, span });
    }
    return out;
  }

  private annotations(node: CstNode): A.Annotation[] {
    const out: A.Annotation[] = [];
    for (const an of children(node, "annotation")) {
      const name = this.ident(token(an, "Name"));
      if (!name) continue;
      const args = this.args(an);
      if (!args) continue;
      const span = this.span(token(an, "At"), name, ...args, token(an, "RParen"));
      if (span) out.push({ kind: "Annotation", name, args, span });
    }
    return out;
  }

  private declaration(node: CstNode): A.BlockDecl | A.ModelDecl | undefined {
    const annotations = this.annotations(node);
    const block = child(node, "blockDecl");
    if (block) return this.blockDecl(block, annotations);
    const model = child(node, "modelDecl");
    if (model) return this.modelDecl(model, annotations);
    return undefined;
  }

  // Declaration spans start at the keyword (or member name), not at the annotations, like Python's decorated defs,
  // so a diagnostic about a declaration points at its own line.
  private blockDecl(node: CstNode, annotations: A.Annotation[]): A.BlockDecl | undefined {
    const name = this.ident(token(node, "Name"));
    if (!name) return undefined;
    const params: A.Param[] = [];
    for (const p of children(node, "param")) push(params, this.param(p));
    const body = this.body(node);
    const span = this.span(token(node, "Block"), name, token(node, "RParen"), ...body, token(node, "RBrace"));
    return span ? { kind: "Block", annotations, name, params, body, span } : undefined;
  }

  private param(node: CstNode): A.Param | undefined {
    const name = this.ident(token(node, "name"));
    if (!name) return undefined;
    const type = this.ident(token(node, "type"));
    const hasDefault = token(node, "Equals") !== undefined;
    const dflt = hasDefault ? this.expression(child(node, "expression")) : undefined;
    // A default that was written but could not be built is a broken param: drop it rather than make it required.
    if (hasDefault && !dflt) return undefined;
    const span = this.span(name, type, dflt);
    if (!span) return undefined;
    const param: A.Param = { kind: "Param", name, span };
    return { ...param, ...(type ? { type } : {}), ...(dflt ? { default: dflt } : {}) };
  }

  private modelDecl(node: CstNode, annotations: A.Annotation[]): A.ModelDecl | undefined {
    const name = this.ident(token(node, "Name"));
    if (!name) return undefined;
    const body = this.body(node);
    const span = this.span(token(node, "Model"), name, ...body, token(node, "RBrace"));
    return span ? { kind: "Model", annotations, name, body, span } : undefined;
  }

  private body(node: CstNode): A.BodyItem[] {
    const out: A.BodyItem[] = [];
    for (const item of children(node, "bodyItem")) {
      const cd = child(item, "constDecl");
      if (cd) out.push(...this.constDecl(cd));
      const fw = child(item, "forwardDecl");
      if (fw) push(out, this.forwardDecl(fw));
      const m = child(item, "member");
      if (m) push(out, this.member(m));
    }
    return out;
  }

  private member(node: CstNode): A.MemberDecl | undefined {
    const annotations = this.annotations(node);
    const name = this.ident(token(node, "name"));
    const init = this.call(child(node, "call"));
    if (!name || !init) return undefined;
    let repeat: A.MemberDecl["repeat"];
    const rep = token(node, "Repeat");
    if (rep) {
      const count = this.expression(child(node, "expression"));
      if (!count) return undefined;
      const hasAs = token(node, "As") !== undefined;
      const index = this.ident(token(node, "index"));
      if (hasAs && !index) return undefined;
      const span = this.span(rep, count, token(node, "RParen"), index);
      if (!span) return undefined;
      repeat = index ? { count, index, span } : { count, span };
    }
    const span = this.span(name, init);
    if (!span) return undefined;
    return repeat ? { kind: "Member", annotations, name, init, repeat, span } : { kind: "Member", annotations, name, init, span };
  }

  private call(node: CstNode | undefined): A.CallExpr | undefined {
    const id = this.ident(token(node, "Name"));
    if (!node || !id || !token(node, "LParen")) return undefined;
    const args = this.args(node);
    if (!args) return undefined;
    const span = this.span(id, token(node, "LParen"), ...args, token(node, "RParen"));
    const callee: A.NameRef = { kind: "Name", name: id.name, span: id.span };
    return span ? { kind: "Call", callee, args, span } : undefined;
  }

  private forwardDecl(node: CstNode): A.ForwardDecl | undefined {
    const kw = token(node, "Forward");
    const inputs: A.Input[] = [];
    for (const i of children(node, "forwardInput")) push(inputs, this.input(i));
    const body = this.stmts(node);
    const span = this.span(kw, token(node, "RParen"), ...body, token(node, "RBrace"));
    return kw && span ? { kind: "Forward", inputs, body, span } : undefined;
  }

  private input(node: CstNode): A.Input | undefined {
    const name = this.ident(token(node, "Name"));
    if (!name) return undefined;
    const tt = child(node, "tensorType");
    const type = tt ? this.tensorType(tt) : undefined;
    const span = this.span(name, type);
    if (!span) return undefined;
    return type ? { kind: "Input", name, type, span } : { kind: "Input", name, span };
  }

  private tensorType(node: CstNode): A.TensorType | undefined {
    const dtype = this.ident(token(node, "Name"));
    if (!dtype) return undefined;
    const dimNodes = children(node, "expression");
    const dims: A.Expr[] = [];
    for (const d of dimNodes) push(dims, this.expression(d));
    // A type whose dims did not all parse would have the wrong rank; leave the input untyped instead.
    if (dims.length === 0 || dims.length !== dimNodes.length) return undefined;
    const span = this.span(dtype, ...dims, token(node, "RBracket"));
    return span ? { kind: "TensorType", dtype, dims, span } : undefined;
  }

  private stmts(node: CstNode): A.Stmt[] {
    const out: A.Stmt[] = [];
    for (const s of children(node, "stmt")) push(out, this.stmt(s));
    return out;
  }

  private stmt(node: CstNode): A.Stmt | undefined {
    const asg = child(node, "assignStmt");
    if (asg) {
      const target = this.ident(token(asg, "Name"));
      const value = this.expression(child(asg, "expression"));
      const span = this.span(target, value);
      return target && value && span ? { kind: "Assign", target, value, span } : undefined;
    }
    const ret = child(node, "returnStmt");
    if (ret) {
      const value = this.expression(child(ret, "expression"));
      const span = this.span(token(ret, "Return"), value);
      return value && span ? { kind: "Return", value, span } : undefined;
    }
    const fr = child(node, "forStmt");
    if (fr) {
      const variable = this.ident(token(fr, "Name"));
      const iterable = this.expression(child(fr, "expression"));
      const body = this.stmts(fr);
      const span = this.span(token(fr, "For"), variable, iterable, ...body, token(fr, "RBrace"));
      return variable && iterable && span ? { kind: "For", variable, iterable, body, span } : undefined;
    }
    return undefined;
  }

  private section(node: CstNode, kind: "Train" | "Parallel", kwKey: string): A.SettingsSection | undefined {
    const kwTok = token(node, kwKey);
    const keyword = this.ident(kwTok);
    if (!keyword) return undefined;
    const bodyNode = child(node, "settingsBody");
    const settings: A.Setting[] = [];
    for (const s of children(bodyNode, "setting")) {
      const key = this.ident(token(s, "Name"));
      const value = this.expression(child(s, "expression"));
      const span = this.span(key, value);
      if (key && value && span) settings.push({ kind: "Setting", key, value, span });
    }
    const span = this.span(keyword, token(bodyNode, "LBrace"), ...settings, token(bodyNode, "RBrace"));
    return span ? { kind, keyword, settings, span } : undefined;
  }

  // ---------- expressions ----------

  /** Groups the flat `unary { op unary }` of the CST by precedence: `* / // %` bind tighter than `+ -`, and both
   * levels are left-associative. Any missing operand or operator drops the whole expression. */
  private expression(node: CstNode | undefined): A.Expr | undefined {
    if (!node) return undefined;
    const operands = node.children["unary"] ?? [];
    const ops = node.children["op"] ?? [];
    if (operands.length === 0 || ops.length !== operands.length - 1) return undefined;
    let sum: A.Expr | undefined; // the + - chain so far
    let sumOp: IToken | undefined; // the + or - waiting for its right-hand term
    let product = this.unaryAt(operands, 0); // the current * / // % chain
    for (let i = 1; i < operands.length; i++) {
      const op = ops[i - 1];
      const right = this.unaryAt(operands, i);
      if (!product || !right || op === undefined || isCstNode(op) || !isRealToken(op)) return undefined;
      if (op.image === "+" || op.image === "-") {
        sum = sum && sumOp ? this.binary(sumOp, sum, product) : product;
        if (!sum) return undefined;
        sumOp = op;
        product = right;
      } else {
        product = this.binary(op, product, right);
      }
    }
    if (!product) return undefined;
    return sum && sumOp ? this.binary(sumOp, sum, product) : product;
  }

  private unaryAt(operands: CstElement[], i: number): A.Expr | undefined {
    const n = operands[i];
    return isCstNode(n) ? this.unary(n) : undefined;
  }

  private binary(op: IToken, left: A.Expr, right: A.Expr): A.Expr | undefined {
    const span = this.span(left, right);
    return span ? { kind: "Binary", op: op.image as A.BinaryOp, left, right, span } : undefined;
  }

  private unary(node: CstNode): A.Expr | undefined {
    let expr = this.operand(node);
    for (const sfx of children(node, "suffix")) {
      if (!expr) return undefined;
      expr = this.suffix(expr, sfx);
    }
    if (!expr) return undefined;
    // Signs bind looser than suffixes: `-a.b` is `-(a.b)`; the innermost sign is the last one written.
    const signs = node.children["sign"] ?? [];
    for (let i = signs.length - 1; i >= 0; i--) {
      const sign = signs[i];
      if (sign === undefined || isCstNode(sign) || !isRealToken(sign)) return undefined;
      const span = this.span(sign, expr);
      if (!span) return undefined;
      expr = { kind: "Unary", op: sign.image === "-" ? "-" : "+", operand: expr, span };
    }
    return expr;
  }

  private suffix(expr: A.Expr, sfx: CstNode): A.Expr | undefined {
    if (sfx.children["LParen"]) {
      const args = this.args(sfx);
      if (args === undefined) return undefined;
      const span = this.span(expr, token(sfx, "LParen"), ...args, token(sfx, "RParen"));
      return span ? { kind: "Call", callee: expr, args, span } : undefined;
    }
    if (sfx.children["Dot"]) {
      const property = this.ident(token(sfx, "Name"));
      const span = this.span(expr, property);
      return property && span ? { kind: "Member", object: expr, property, span } : undefined;
    }
    if (sfx.children["LBracket"]) {
      const index = this.expression(child(sfx, "expression"));
      const span = this.span(expr, index, token(sfx, "RBracket"));
      return index && span ? { kind: "Index", object: expr, index, span } : undefined;
    }
    return undefined;
  }

  /** The `arg` children of a call-like node; undefined when one of them could not be built, because dropping a
   * single argument would shift the positions of the others. */
  private args(node: CstNode | undefined): A.Arg[] | undefined {
    const out: A.Arg[] = [];
    for (const a of children(node, "arg")) {
      const hasName = a.children["Colon"] !== undefined || a.children["Name"] !== undefined;
      const name = this.ident(token(a, "Name"));
      const value = this.expression(child(a, "expression"));
      if (!value || (hasName && !name)) return undefined;
      const span = this.span(name, value);
      if (!span) return undefined;
      out.push(name ? { name, value, span } : { value, span });
    }
    return out;
  }

  /** The primary at the start of a unary node (number, string, name, parenthesized, list, ...). */
  private operand(node: CstNode): A.Expr | undefined {
    const num = token(node, "Number");
    if (num) return this.numberLit(num);
    const str = token(node, "String");
    if (str) return this.stringLit(str);
    for (const [key, value] of [["True", true], ["False", false]] as const) {
      const t = token(node, key);
      if (t) return { kind: "Bool", value, span: this.tokenSpan(t) };
    }
    const auto = token(node, "Auto");
    if (auto) return { kind: "Auto", span: this.tokenSpan(auto) };
    const name = this.ident(token(node, "Name"));
    if (name) return { kind: "Name", name: name.name, span: name.span };
    const paren = child(node, "parenExpr");
    if (paren) {
      const itemNodes = children(paren, "expression");
      const items: A.Expr[] = [];
      for (const e of itemNodes) push(items, this.expression(e));
      if (items.length === 0 || items.length !== itemNodes.length) return undefined;
      if (items.length === 1 && (paren.children["Comma"] ?? []).length === 0) return items[0];
      const span = this.span(token(paren, "LParen"), ...items, token(paren, "RParen"));
      return span ? { kind: "Tuple", items, span } : undefined;
    }
    const list = child(node, "listExpr");
    if (list) {
      const itemNodes = children(list, "expression");
      const items: A.Expr[] = [];
      for (const e of itemNodes) push(items, this.expression(e));
      if (items.length !== itemNodes.length) return undefined;
      const span = this.span(token(list, "LBracket"), ...items, token(list, "RBracket"));
      return span ? { kind: "List", items, span } : undefined;
    }
    return undefined;
  }

  private numberLit(t: IToken): A.NumberLit | undefined {
    const span = this.tokenSpan(t);
    // BadNumber tokens were already reported by the lexer pass.
    if (t.tokenType === BadNumber) return undefined;
    const text = t.image;
    const lit = literalValue(text);
    if ("problem" in lit) {
      this.diagnostics.push(error("FSM120", lit.problem, span));
      return undefined;
    }
    return { kind: "Number", value: lit.value, isInt: lit.isInt, text, span };
  }

  private stringLit(t: IToken | undefined): A.StringLit | undefined {
    if (!isRealToken(t)) return undefined;
    const value = decodeString(t.image, t.tokenType !== UnterminatedString);
    return { kind: "String", value, span: this.tokenSpan(t) };
  }
}

function push<T>(out: T[], item: T | undefined): void {
  if (item !== undefined) out.push(item);
}
