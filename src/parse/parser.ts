// Owns the .fsm grammar: one chevrotain CstParser (rules as properties) with error recovery and readable messages.
import type { IParserErrorMessageProvider, IToken, TokenType } from "chevrotain";
import { CstParser, EOF, tokenMatcher } from "./chevrotain.js";
import * as T from "./tokens.js";

// ---------- error messages ----------

/** How a token type reads in a message: `')'`, `'return'`, `a name`, `end of file`. */
export function describeTokenType(t: TokenType): string {
  if (t === EOF) return "end of file";
  if (t === T.Name || t === T.DigitWord) return "a name";
  if (t === T.NumberLit || t === T.BadNumber) return "a number";
  if (t === T.StringLit || t === T.UnterminatedString) return "a string";
  return t.LABEL ?? `'${t.name}'`;
}

/** How an actual token reads in a message: its source text in quotes, or `end of file`. */
export function describeToken(t: IToken | undefined): string {
  if (t === undefined || t.tokenType === EOF || !Number.isFinite(t.startOffset)) return "end of file";
  return T.quoteSource(t.image);
}

/** "a, b or c" without duplicates, in first-seen order. */
function oneOf(items: readonly string[]): string {
  const unique = [...new Set(items)];
  if (unique.length <= 1) return unique[0] ?? "something else";
  return `${unique.slice(0, -1).join(", ")} or ${unique[unique.length - 1]}`;
}

// Tokens that can start an operand: when all of them are expected, "an expression" reads better than ten tokens
// (the signs '-' and '+' are folded into the phrase too when they are expected alongside).
const OPERAND_FIRST: readonly TokenType[] = [T.NumberLit, T.StringLit, T.True, T.False, T.Auto, T.Name, T.LParen, T.LBracket];
const SIGNS: readonly TokenType[] = [T.Minus, T.Plus];

/** Describes the set of tokens that could have come next (the first token of each expected path). */
function describeFirsts(firsts: readonly (TokenType | undefined)[]): string {
  const set = new Set(firsts);
  const isExpr = OPERAND_FIRST.every((t) => set.has(t));
  const words: string[] = [];
  for (const t of firsts) {
    if (isExpr && t !== undefined && (OPERAND_FIRST.includes(t) || SIGNS.includes(t))) words.push("an expression");
    else words.push(t === undefined ? "end of file" : describeTokenType(t));
  }
  return oneOf(words);
}

// Alternations whose alternatives read better as one phrase than as a list of their first tokens.
const TOP_ITEMS = ["'import'", "'const'", "'block'", "'model'", "'train'", "'parallel'", "an annotation"];
const TOP_ITEM = oneOf(TOP_ITEMS);
const RULE_PHRASES: Record<string, string> = {
  topItem: TOP_ITEM,
  declaration: "'block' or 'model'",
  bodyItem: "'const', a member or 'forward'",
  stmt: "a statement (assignment, 'return' or 'for')",
};

// A '}' that closes a repetition: what else could have come instead, so a stray token inside a body reads
// "expected a member, 'const', 'forward' or '}'" rather than only "expected '}'".
const BEFORE_CLOSING_BRACE: Record<string, string> = {
  modelDecl: "a member, 'const', 'forward' or '}'",
  blockDecl: "a member, 'const', 'forward' or '}'",
  forwardDecl: "a statement or '}'",
  forStmt: "a statement or '}'",
  settingsBody: "a setting (name = value) or '}'",
};

const messages: IParserErrorMessageProvider = {
  buildMismatchTokenMessage({ expected, actual, ruleName }) {
    // In-repetition recovery at top level reports "expected EOF": say what may start a declaration instead.
    if (expected === EOF && ruleName === "file") return `expected ${TOP_ITEM} but found ${describeToken(actual)}`;
    // A member's right-hand side must be a call; `x = 3` otherwise reads "expected a name but found '3'".
    if (ruleName === "call" && expected === T.Name) return `expected an op or block call such as linear(d, d) but found ${describeToken(actual)}`;
    const phrase = expected === T.RBrace ? BEFORE_CLOSING_BRACE[ruleName] : undefined;
    return `expected ${phrase ?? describeTokenType(expected)} but found ${describeToken(actual)}`;
  },
  buildNotAllInputParsedMessage({ firstRedundant }) {
    return `expected ${oneOf([...TOP_ITEMS, "end of file"])} but found ${describeToken(firstRedundant)}`;
  },
  buildNoViableAltMessage({ expectedPathsPerAlt, actual, ruleName }) {
    const expected = RULE_PHRASES[ruleName] ?? describeFirsts(expectedPathsPerAlt.flatMap((alt) => alt.map((path) => path[0])));
    return `expected ${expected} but found ${describeToken(actual[0])}`;
  },
  buildEarlyExitMessage({ expectedIterationPaths, actual, ruleName }) {
    const expected = RULE_PHRASES[ruleName] ?? describeFirsts(expectedIterationPaths.map((path) => path[0]));
    return `expected ${expected} but found ${describeToken(actual[0])} (at least one is required)`;
  },
};

// ---------- grammar ----------

/**
 * The grammar of grammar/README.md. Differences are only in factoring, none in the language accepted:
 * `declaration` hoists the annotations shared by block and model so one token of lookahead chooses between them,
 * `binding` is one `NAME = expr` of a const, `call` (undefined in the README) is `NAME "(" [args] ")"`, `args` is
 * inlined where it is used, `unary` folds in postfix and primary (see there), `settingsBody` is shared by train and
 * parallel, and postfix suffixes / operators are sub-rules or labelled tokens so the CST keeps their source order.
 */
export class FsmParser extends CstParser {
  /** `validate`: check the grammar itself (ambiguities, left recursion, ...) during self-analysis. The grammar
   *  is fixed, so the tests check it once (test/parse/grammar-validation.test.ts) and every run skips it: a
   *  third of the self-analysis each fsm process pays before it parses anything. */
  constructor(options: { validate?: boolean } = {}) {
    super(T.allTokens as TokenType[], {
      recoveryEnabled: true,
      maxLookahead: 2,
      errorMessageProvider: messages,
      skipValidations: options.validate !== true,
    });
    this.performSelfAnalysis();
  }

  // chevrotain tries inserting a missing token before deleting a stray one. When the token after the stray one is
  // exactly what was expected (`linear(d d)`), deleting gives one diagnostic where inserting cascades into more.
  protected override canTokenTypeBeInsertedInRecovery(tokType: TokenType): boolean {
    return !tokenMatcher(this.LA(2), tokType);
  }

  // file = { import | const | block | model | train | parallel } ;
  public file = this.RULE("file", () => {
    this.MANY(() => this.SUBRULE(this.topItem));
  });

  public topItem = this.RULE("topItem", () => {
    this.OR([
      { ALT: () => this.SUBRULE(this.importDecl) },
      { ALT: () => this.SUBRULE(this.constDecl) },
      { ALT: () => this.SUBRULE(this.declaration) },
      { ALT: () => this.SUBRULE(this.trainSection) },
      { ALT: () => this.SUBRULE(this.parallelSection) },
    ]);
  });

  // import = "import" STRING ;
  public importDecl = this.RULE("importDecl", () => {
    this.CONSUME(T.Import);
    this.CONSUME(T.StringLit);
  });

  // const = "const" NAME "=" expr { "," NAME "=" expr } ;
  public constDecl = this.RULE("constDecl", () => {
    this.CONSUME(T.Const);
    this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.binding) });
  });

  public binding = this.RULE("binding", () => {
    this.CONSUME(T.Name);
    this.CONSUME(T.Equals);
    this.SUBRULE(this.expression);
  });

  // annotation = "@" NAME [ "(" [ args ] ")" ] ;
  public annotation = this.RULE("annotation", () => {
    this.CONSUME(T.At);
    this.CONSUME(T.Name);
    this.OPTION(() => {
      this.CONSUME(T.LParen);
      this.OPTION1(() => this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.arg) }));
      this.CONSUME(T.RParen);
    });
  });

  // { annotation } ( block | model )
  public declaration = this.RULE("declaration", () => {
    this.MANY(() => this.SUBRULE(this.annotation));
    this.OR([{ ALT: () => this.SUBRULE(this.blockDecl) }, { ALT: () => this.SUBRULE(this.modelDecl) }]);
  });

  // block = "block" NAME "(" [ param { "," param } ] ")" "{" { body_item } "}" ;
  public blockDecl = this.RULE("blockDecl", () => {
    this.CONSUME(T.Block);
    this.CONSUME(T.Name);
    this.CONSUME(T.LParen);
    this.OPTION(() => this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.param) }));
    this.CONSUME(T.RParen);
    this.CONSUME(T.LBrace);
    this.MANY(() => this.SUBRULE(this.bodyItem));
    this.CONSUME(T.RBrace);
  });

  // param = NAME ":" NAME [ "=" expr ] ;
  public param = this.RULE("param", () => {
    this.CONSUME(T.Name, { LABEL: "name" });
    this.CONSUME(T.Colon);
    this.CONSUME1(T.Name, { LABEL: "type" });
    this.OPTION(() => {
      this.CONSUME(T.Equals);
      this.SUBRULE(this.expression);
    });
  });

  // model = "model" NAME "{" { body_item } "}" ;
  public modelDecl = this.RULE("modelDecl", () => {
    this.CONSUME(T.Model);
    this.CONSUME(T.Name);
    this.CONSUME(T.LBrace);
    this.MANY(() => this.SUBRULE(this.bodyItem));
    this.CONSUME(T.RBrace);
  });

  // body_item = const | member | forward ;
  public bodyItem = this.RULE("bodyItem", () => {
    this.OR([
      { ALT: () => this.SUBRULE(this.constDecl) },
      { ALT: () => this.SUBRULE(this.forwardDecl) },
      { ALT: () => this.SUBRULE(this.member) },
    ]);
  });

  // member = { annotation } NAME "=" [ "repeat" "(" expr ")" [ "as" NAME ] ] call ;
  public member = this.RULE("member", () => {
    this.MANY(() => this.SUBRULE(this.annotation));
    this.CONSUME(T.Name, { LABEL: "name" });
    this.CONSUME(T.Equals);
    this.OPTION(() => {
      this.CONSUME(T.Repeat);
      this.CONSUME(T.LParen);
      this.SUBRULE(this.expression);
      this.CONSUME(T.RParen);
      this.OPTION1(() => {
        this.CONSUME(T.As);
        this.CONSUME1(T.Name, { LABEL: "index" });
      });
    });
    this.SUBRULE(this.call);
  });

  // call = NAME "(" [ args ] ")" ;
  public call = this.RULE("call", () => {
    this.CONSUME(T.Name);
    this.CONSUME(T.LParen);
    this.OPTION(() => this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.arg) }));
    this.CONSUME(T.RParen);
  });

  // forward = "forward" "(" [ input { "," input } ] ")" "{" { stmt } "}" ;
  public forwardDecl = this.RULE("forwardDecl", () => {
    this.CONSUME(T.Forward);
    this.CONSUME(T.LParen);
    this.OPTION(() => this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.forwardInput) }));
    this.CONSUME(T.RParen);
    this.CONSUME(T.LBrace);
    this.MANY(() => this.SUBRULE(this.stmt));
    this.CONSUME(T.RBrace);
  });

  // input = NAME [ ":" NAME "[" expr { "," expr } "]" ] ;
  public forwardInput = this.RULE("forwardInput", () => {
    this.CONSUME(T.Name);
    this.OPTION(() => {
      this.CONSUME(T.Colon);
      this.SUBRULE(this.tensorType);
    });
  });

  public tensorType = this.RULE("tensorType", () => {
    this.CONSUME(T.Name);
    this.CONSUME(T.LBracket);
    this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.expression) });
    this.CONSUME(T.RBracket);
  });

  // stmt = NAME "=" expr | "return" expr | "for" NAME "in" expr "{" { stmt } "}" ;
  public stmt = this.RULE("stmt", () => {
    this.OR([
      { ALT: () => this.SUBRULE(this.assignStmt) },
      { ALT: () => this.SUBRULE(this.returnStmt) },
      { ALT: () => this.SUBRULE(this.forStmt) },
    ]);
  });

  public assignStmt = this.RULE("assignStmt", () => {
    this.CONSUME(T.Name);
    this.CONSUME(T.Equals);
    this.SUBRULE(this.expression);
  });

  public returnStmt = this.RULE("returnStmt", () => {
    this.CONSUME(T.Return);
    this.SUBRULE(this.expression);
  });

  public forStmt = this.RULE("forStmt", () => {
    this.CONSUME(T.For);
    this.CONSUME(T.Name);
    this.CONSUME(T.In);
    this.SUBRULE(this.expression);
    this.CONSUME(T.LBrace);
    this.MANY(() => this.SUBRULE(this.stmt));
    this.CONSUME(T.RBrace);
  });

  // train = "train" "{" { setting [ "," ] } "}" ;
  public trainSection = this.RULE("trainSection", () => {
    this.CONSUME(T.Train);
    this.SUBRULE(this.settingsBody);
  });

  // parallel = "parallel" "{" { setting [ "," ] } "}" ;
  public parallelSection = this.RULE("parallelSection", () => {
    this.CONSUME(T.Parallel);
    this.SUBRULE(this.settingsBody);
  });

  public settingsBody = this.RULE("settingsBody", () => {
    this.CONSUME(T.LBrace);
    this.MANY(() => {
      this.SUBRULE(this.setting);
      this.OPTION(() => this.CONSUME(T.Comma));
    });
    this.CONSUME(T.RBrace);
  });

  // setting = NAME "=" expr ;
  public setting = this.RULE("setting", () => {
    this.CONSUME(T.Name);
    this.CONSUME(T.Equals);
    this.SUBRULE(this.expression);
  });

  // expr = term { ("+" | "-") term } ;  term = unary { ("*" | "/" | "%") unary } ;
  // Parsed flat as `unary { op unary }` and grouped by precedence in the AST builder: a `term` rule would add a CST
  // node to every operand of every expression, which dominated parse time and memory on large generated models.
  public expression = this.RULE("expression", () => {
    this.SUBRULE(this.unary);
    this.MANY(() => {
      this.OR([
        { ALT: () => this.CONSUME(T.Plus, { LABEL: "op" }) },
        { ALT: () => this.CONSUME(T.Minus, { LABEL: "op" }) },
        { ALT: () => this.CONSUME(T.Star, { LABEL: "op" }) },
        { ALT: () => this.CONSUME(T.Slash, { LABEL: "op" }) },
        { ALT: () => this.CONSUME(T.Percent, { LABEL: "op" }) },
      ]);
      this.SUBRULE1(this.unary);
    });
  });

  // unary = ("-" | "+") unary | postfix ;  postfix = primary { suffix } ;  primary = NUMBER | STRING | ... ;
  // Written as one rule, prefix signs first: every operand of every expression passes through here, and each rule
  // level costs a CST node, so folding unary/postfix/primary into one rule roughly halves the parse time and memory
  // of large models. The language is unchanged: signs apply to the whole postfix expression (`-a.b` is `-(a.b)`).
  public unary = this.RULE("unary", () => {
    this.MANY(() =>
      this.OR([{ ALT: () => this.CONSUME(T.Minus, { LABEL: "sign" }) }, { ALT: () => this.CONSUME(T.Plus, { LABEL: "sign" }) }]),
    );
    this.OR1([
      { ALT: () => this.CONSUME(T.NumberLit) },
      { ALT: () => this.CONSUME(T.StringLit) },
      { ALT: () => this.CONSUME(T.True) },
      { ALT: () => this.CONSUME(T.False) },
      { ALT: () => this.CONSUME(T.Auto) },
      { ALT: () => this.CONSUME(T.Name) },
      { ALT: () => this.SUBRULE(this.parenExpr) },
      { ALT: () => this.SUBRULE(this.listExpr) },
    ]);
    this.MANY1(() => this.SUBRULE(this.suffix));
  });

  // suffix = "(" [ args ] ")" | "." NAME | "[" expr "]" ;
  public suffix = this.RULE("suffix", () => {
    this.OR([
      {
        ALT: () => {
          this.CONSUME(T.LParen);
          this.OPTION(() => this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.arg) }));
          this.CONSUME(T.RParen);
        },
      },
      {
        ALT: () => {
          this.CONSUME(T.Dot);
          this.CONSUME(T.Name);
        },
      },
      {
        ALT: () => {
          this.CONSUME(T.LBracket);
          this.SUBRULE(this.expression);
          this.CONSUME(T.RBracket);
        },
      },
    ]);
  });

  // arg = [ NAME ":" ] expr ;  (two tokens of lookahead tell `name: value` from an expression starting with a name)
  public arg = this.RULE("arg", () => {
    this.OPTION(() => {
      this.CONSUME(T.Name);
      this.CONSUME(T.Colon);
    });
    this.SUBRULE(this.expression);
  });

  public parenExpr = this.RULE("parenExpr", () => {
    this.CONSUME(T.LParen);
    this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.expression) });
    this.CONSUME(T.RParen);
  });

  public listExpr = this.RULE("listExpr", () => {
    this.CONSUME(T.LBracket);
    this.OPTION(() => this.AT_LEAST_ONE_SEP({ SEP: T.Comma, DEF: () => this.SUBRULE(this.expression) }));
    this.CONSUME(T.RBracket);
  });
}

let shared: FsmParser | undefined;

/** The one parser instance: self-analysis is costly, so it runs once per process and parses reuse it. */
export function sharedParser(): FsmParser {
  shared ??= new FsmParser();
  return shared;
}
