// Owns the public surface of the parse phase: parseSource and the AST types.
export { parseSource, type ParseResult } from "./parse-file.js";
export type * from "./ast.js";
