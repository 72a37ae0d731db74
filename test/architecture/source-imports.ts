// Every module reference of a TypeScript source, read with the compiler's parser rather than a regex, so
// multi-line, `import type`, `export ... from`, side-effect and `import()` forms all count and comments or
// strings that look like imports do not.
import ts from "typescript";

export interface SourceImport {
  /** The specifier as written: `../runtime/trace.js`, `node:fs`. */
  readonly specifier: string;
  /** 1-based line of the statement or expression. */
  readonly line: number;
}

export function sourceImports(fileName: string, text: string): SourceImport[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: SourceImport[] = [];
  const add = (node: ts.Node, spec: ts.Node | undefined) => {
    if (spec && ts.isStringLiteralLike(spec)) out.push({ specifier: spec.text, line: file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1 });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node, node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node, node.moduleReference.expression);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node, node.arguments[0]);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal);
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}
