// Layering rules over the folder graph: which folders a folder must not import, each broken rule listed
// with the imports that break it.
import type { FolderGraph } from "./folder-graph.js";

export interface LayerRule {
  /** The importing folder; `*` for every folder but the forbidden ones themselves. */
  readonly from: string;
  readonly mustNotImport: readonly string[];
}

/** `viz → runtime: src/viz/trace.ts:4 ../runtime/trace.js`, one line per offending import. */
export function ruleViolations(graph: FolderGraph, rule: LayerRule): string[] {
  const out: string[] = [];
  for (const [from, edges] of [...graph].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (rule.from !== "*" && from !== rule.from) continue;
    for (const to of rule.mustNotImport) {
      if (to === from) continue;
      for (const where of edges.get(to) ?? []) out.push(`${from} → ${to}: ${where}`);
    }
  }
  return out;
}
