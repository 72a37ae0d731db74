// Loads a root .fsm file and everything it imports (paths relative to the importing file), parsing each once,
// reporting unreadable files (FSM200) and import cycles (FSM201). Files come back imports-first.
import * as fs from "node:fs";
import * as path from "node:path";
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import { fileSpan } from "../diagnostics/span.js";
import type { FileAst, ImportDecl } from "../parse/ast.js";
import { parseSource } from "../parse/parse-file.js";

/** Where sources come from: the file system by default, a map in tests. */
export interface SourceHost {
  /** Text of the file at an absolute path, or undefined when it cannot be read. */
  readFile(absPath: string): string | undefined;
}

export const nodeHost: SourceHost = {
  readFile(absPath) {
    try {
      if (!fs.statSync(absPath).isFile()) return undefined;
      return fs.readFileSync(absPath, "utf8");
    } catch {
      return undefined;
    }
  },
};

export interface LoadedFile {
  /** Path as shown in diagnostics (as given for the root; joined relative paths for imports). */
  readonly path: string;
  readonly absPath: string;
  readonly text: string;
  readonly ast: FileAst;
}

export interface Program {
  readonly root: LoadedFile | undefined;
  /** Imports before the files that import them; the root last. */
  readonly files: readonly LoadedFile[];
  readonly sources: ReadonlyMap<string, string>;
  readonly diagnostics: readonly Diagnostic[];
}

export function loadProgram(rootPath: string, host: SourceHost = nodeHost): Program {
  const files: LoadedFile[] = [];
  const sources = new Map<string, string>();
  const diags: Diagnostic[] = [];
  const done = new Map<string, LoadedFile>();
  const stack: string[] = [];
  const stackDisplay: string[] = [];

  const visit = (display: string, via: ImportDecl | undefined): LoadedFile | undefined => {
    const abs = path.resolve(display);
    const seen = done.get(abs);
    if (seen) return seen;
    const onStack = stack.indexOf(abs);
    if (onStack >= 0 && via) {
      const cycle = [...stackDisplay.slice(onStack), display].join(" → ");
      diags.push(error("FSM201", `import cycle: ${cycle}`, via.path.span));
      return undefined;
    }
    const text = host.readFile(abs);
    if (text === undefined) {
      const span = via ? via.path.span : fileSpan(display);
      diags.push(error("FSM200", `cannot read '${display}'`, span));
      return undefined;
    }
    sources.set(display, text);
    const { ast, diagnostics } = parseSource(display, text);
    diags.push(...diagnostics);
    stack.push(abs);
    stackDisplay.push(display);
    for (const item of ast.items) {
      if (item.kind !== "Import") continue;
      // Relative to the importing file; an absolute path as it is.
      const target = item.path.value;
      visit(path.isAbsolute(target) ? path.normalize(target) : path.normalize(path.join(path.dirname(display), target)), item);
    }
    stack.pop();
    stackDisplay.pop();
    const loaded: LoadedFile = { path: display, absPath: abs, text, ast };
    done.set(abs, loaded);
    files.push(loaded);
    return loaded;
  };

  const root = visit(rootPath, undefined);
  return { root, files, sources, diagnostics: diags };
}
