// The folder-level dependency graph of src/: an edge a → b for each src/a file importing a src/b file, with
// the imports behind it (file:line and specifier) so a failing rule can say which lines to change.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { sourceImports } from "./source-imports.js";

/** folder → imported folder → the imports that make the edge, `src/viz/trace.ts:4 ../runtime/trace.js`. */
export type FolderGraph = ReadonlyMap<string, ReadonlyMap<string, readonly string[]>>;

export interface SourceGraph {
  readonly files: number;
  readonly graph: FolderGraph;
}

/** `src/<folder>/...` → `<folder>`; a file directly in src/ is its own node. */
function folderOf(pathInSrc: string): string {
  return pathInSrc.split(sep)[0]!;
}

export function srcFolderGraph(srcRoot: string): SourceGraph {
  const graph = new Map<string, Map<string, string[]>>();
  const files = (readdirSync(srcRoot, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).sort();
  for (const f of files) {
    const from = folderOf(f);
    if (!graph.has(from)) graph.set(from, new Map());
    const path = join(srcRoot, f);
    for (const imp of sourceImports(path, readFileSync(path, "utf8"))) {
      if (!imp.specifier.startsWith(".")) continue; // node: built-ins and packages are no src folder
      const target = relative(srcRoot, resolve(dirname(path), imp.specifier));
      if (target.startsWith("..")) continue; // outside src/ (package.json and the like)
      const to = folderOf(target);
      if (to === from) continue;
      const edges = graph.get(from)!;
      if (!edges.has(to)) edges.set(to, []);
      edges.get(to)!.push(`src/${f.split(sep).join("/")}:${imp.line} ${imp.specifier}`);
    }
  }
  return { files: files.length, graph };
}
