// Cycles of a directed graph: its strongly connected components (Tarjan) of more than one node, each shown
// as one shortest cycle through its first node, so a report names a path to cut rather than a blob.

/** Node → the nodes it has an edge to. */
export type Edges = ReadonlyMap<string, readonly string[]>;

function successors(g: Edges, n: string): string[] {
  return [...(g.get(n) ?? [])].sort();
}

/** Components of two or more nodes, each sorted, in order of their first node; self-loops are not cycles here. */
export function cyclicComponents(g: Edges): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of successors(g, v)) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) out.push(component.sort());
  };
  const nodes = new Set<string>([...g.keys(), ...[...g.values()].flat()]);
  for (const n of [...nodes].sort()) if (!index.has(n)) connect(n);
  return out.sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
}

/** A shortest cycle through the component's first node, staying inside it: `[a, b, a]`. */
export function cycleIn(g: Edges, component: readonly string[]): string[] {
  const inside = new Set(component);
  const start = component[0]!;
  const parent = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i]!;
    for (const w of successors(g, v)) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(parent.get(path[0]!)!);
        return [...path, start];
      }
      if (!parent.has(w)) {
        parent.set(w, v);
        queue.push(w);
      }
    }
  }
  throw new Error(`internal: no cycle through ${start} in its component ${component.join(", ")}`);
}

/** Every cyclic component as one cycle. */
export function findCycles(g: Edges): string[][] {
  return cyclicComponents(g).map((c) => cycleIn(g, c));
}
