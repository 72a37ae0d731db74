// Lexical environments for name lookup: a chain of scopes (forward locals → block members/params/consts →
// file-level constants), each lookup reporting what names exist for "did you mean" suggestions.
import type { Value } from "./values.js";

export interface Env {
  lookup(name: string): Value | undefined;
  /** Every name visible from here (for suggestions). */
  names(): string[];
}

export class Scope implements Env {
  private readonly vars = new Map<string, Value>();
  constructor(private readonly parent?: Env) {}

  define(name: string, value: Value): void {
    this.vars.set(name, value);
  }

  hasOwn(name: string): boolean {
    return this.vars.has(name);
  }

  lookup(name: string): Value | undefined {
    return this.vars.get(name) ?? this.parent?.lookup(name);
  }

  names(): string[] {
    return [...this.vars.keys(), ...(this.parent?.names() ?? [])];
  }
}

/** An environment whose values are computed on first use (file-level constants may refer to later ones). */
export class LazyScope implements Env {
  private readonly cache = new Map<string, Value | undefined>();
  private readonly inProgress = new Set<string>();
  constructor(
    private readonly declared: ReadonlyMap<string, unknown>,
    private readonly compute: (name: string, cycle: boolean) => Value | undefined,
    private readonly parent?: Env,
  ) {}

  lookup(name: string): Value | undefined {
    if (!this.declared.has(name)) return this.parent?.lookup(name);
    if (this.cache.has(name)) return this.cache.get(name);
    if (this.inProgress.has(name)) return this.compute(name, true);
    this.inProgress.add(name);
    const v = this.compute(name, false);
    this.inProgress.delete(name);
    this.cache.set(name, v);
    return v;
  }

  names(): string[] {
    return [...this.declared.keys(), ...(this.parent?.names() ?? [])];
  }
}
