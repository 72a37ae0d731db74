// Tests every expression form, operator precedence and associativity, and number/name literals.
import { describe, expect, it } from "vitest";
import { parseSource } from "../../src/parse/index.js";
import { expr, sexpr } from "./helpers.js";

describe("expression forms", () => {
  it.each([
    ["42", "42"],
    ["4.0", "4.0"],
    ['"train.bin"', '"train.bin"'],
    ["true", "true"],
    ["false", "false"],
    ["auto", "auto"],
    ["d_model", "d_model"],
    ["wte.weight", "(. wte weight)"],
    ["layers[3]", "([] layers 3)"],
    ["f()", "(call f)"],
    ["linear(d, 4 * d, bias: false)", "(call linear d (* 4 d) bias:false)"],
    ["-x", "(- x)"],
    ["+x", "(+ x)"],
    ["--x", "(- (- x))"],
    ["(0.9, 0.95)", "(tuple 0.9 0.95)"],
    ["(1, (2, 3))", "(tuple 1 (tuple 2 3))"],
    ["[]", "[]"],
    ["[1, 2, 3]", "[1 2 3]"],
    ["[[1], []]", "[[1] []]"],
    ["(a)", "a"],
    ["((a))", "a"],
    ["a.b.c", "(. (. a b) c)"],
    ["layers[0].attn.qkv(x)[1]", "([] (call (. (. ([] layers 0) attn) qkv) x) 1)"],
    ["f(g)(h)", "(call (call f g) h)"],
    ['tokens("train.bin", dtype: u16)', '(call tokens "train.bin" dtype:u16)'],
    ["adam(lr: 3e-3, betas: (0.9, 0.99))", "(call adam lr:3e-3 betas:(tuple 0.9 0.99))"],
    ["f(a: b: c)", null],
  ])("%s", (src, expected) => {
    if (expected === null) {
      expect(parseSource("t.fsm", `const x = ${src}`).diagnostics.length).toBeGreaterThan(0);
    } else {
      expect(sexpr(expr(src))).toBe(expected);
    }
  });

  it("keyword and positional arguments keep their order and spans", () => {
    const e = expr("f(1, k: 2)");
    if (e.kind !== "Call") throw new Error("not a call");
    expect(e.args.map((a) => [a.name?.name, a.span.column, a.span.endColumn])).toEqual([
      [undefined, 13, 14],
      ["k", 16, 20],
    ]);
    expect(e.span).toMatchObject({ column: 11, endColumn: 21 });
  });

  it("a tuple's span covers its parentheses; a parenthesized expression is the inner node", () => {
    expect(expr("(1, 2)").span).toMatchObject({ column: 11, endColumn: 17 });
    expect(expr("(x)").span).toMatchObject({ column: 12, endColumn: 13 });
  });
});

describe("operator precedence", () => {
  it.each([
    ["a + b * c", "(+ a (* b c))"],
    ["a * b + c", "(+ (* a b) c)"],
    ["a - b - c", "(- (- a b) c)"],
    ["a / b * c", "(* (/ a b) c)"],
    ["a + b - c + d", "(+ (- (+ a b) c) d)"],
    ["a * b / c % d", "(% (/ (* a b) c) d)"],
    ["a + b * c - d * e", "(- (+ a (* b c)) (* d e))"],
    ["(a + b) * c", "(* (+ a b) c)"],
    ["-a * b", "(* (- a) b)"],
    ["a * -b", "(* a (- b))"],
    ["-a.b", "(- (. a b))"],
    ["-f(x)[0]", "(- ([] (call f x) 0))"],
    ["a - -1", "(- a (- 1))"],
    ["2 * (d + 1) / heads", "(/ (* 2 (+ d 1)) heads)"],
    ["x[i] % 2 + 1", "(+ (% ([] x i) 2) 1)"],
  ])("%s", (src, expected) => {
    expect(sexpr(expr(src))).toBe(expected);
  });

  it("`//` always starts a comment (there is no floor-division operator)", () => {
    expect(sexpr(expr("d//heads"))).toBe("d");
    expect(sexpr(expr("d // heads"))).toBe("d");
    expect(sexpr(expr("d + // comment\n 1"))).toBe("(+ d 1)");
  });

  it("binary spans cover both operands", () => {
    const e = expr("a + b * c");
    expect(e.span).toMatchObject({ start: 10, end: 19 });
    if (e.kind !== "Binary") throw new Error("not binary");
    expect(e.right.span).toMatchObject({ start: 14, end: 19 });
  });
});

describe("numbers", () => {
  it.each([
    ["12", 12, true],
    ["50_257", 50257, true],
    ["1_000_000", 1000000, true],
    ["0.1", 0.1, false],
    ["6e-4", 6e-4, false],
    ["1e5", 1e5, false],
    ["1.5E3", 1500, false],
    ["2E+2", 200, false],
    ["1_0.2_5", 10.25, false],
  ])("%s", (src, value, isInt) => {
    expect(expr(src)).toMatchObject({ kind: "Number", value, isInt, text: src });
  });

  it("a non-finite number is FSM120 and the node is dropped", () => {
    const { ast, diagnostics } = parseSource("t.fsm", "const a = 1e999, b = 2");
    expect(diagnostics.map((d) => [d.code, d.span.column, d.span.endColumn])).toEqual([["FSM120", 11, 16]]);
    expect(ast.items.map((i) => i.kind === "Const" && i.name.name)).toEqual(["b"]);
  });

  it.each(["50_", "1__0", "1.5x", "1.5_"])("%s is an invalid number (FSM120)", (src) => {
    const { diagnostics } = parseSource("t.fsm", `const a = ${src}`);
    expect(diagnostics.map((d) => [d.code, d.span.column, d.span.endColumn])).toEqual([["FSM120", 11, 11 + src.length]]);
  });
});

describe("names and keywords", () => {
  it.each(["1f1b", "information", "asx", "blocks", "forwards", "in_proj", "returned", "automatic", "_x", "B", "truex"])(
    "%s is a name",
    (src) => {
      expect(expr(src)).toMatchObject({ kind: "Name", name: src });
    },
  );

  it("1f1b is one name token, 6e-4 one number", () => {
    expect(sexpr(expr("1f1b + 6e-4"))).toBe("(+ 1f1b 6e-4)");
  });

  it.each(["import", "const", "block", "model", "forward", "return", "for", "in", "repeat", "as", "train", "parallel"])(
    "%s is a keyword, not a name",
    (kw) => {
      expect(parseSource("t.fsm", `const x = ${kw}`).diagnostics.length).toBeGreaterThan(0);
    },
  );
});

describe("strings", () => {
  it("decodes escapes", () => {
    expect(expr(String.raw`"a\"b\\c\nd\te"`)).toMatchObject({ kind: "String", value: 'a"b\\c\nd\te' });
  });

  it("reports unknown escapes as FSM100 at the backslash", () => {
    const { diagnostics } = parseSource("t.fsm", String.raw`const s = "a\qb"`);
    expect(diagnostics.map((d) => [d.code, d.span.line, d.span.column, d.span.endColumn])).toEqual([["FSM100", 1, 13, 15]]);
  });
});
