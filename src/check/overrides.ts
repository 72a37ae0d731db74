// `--set train.KEY=VALUE` / `--set parallel.KEY=VALUE`: each override is parsed as a one-setting section with
// the real parser (so values have the file syntax and diagnostics point into the override text), then
// replaces the file's setting of the same key.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import { spanAt } from "../diagnostics/span.js";
import type { Setting, SettingsSection } from "../parse/ast.js";
import { parseSource } from "../parse/parse-file.js";

export interface Overrides {
  readonly train: readonly Setting[];
  readonly parallel: readonly Setting[];
  /** Synthetic sources (`--set #1`) for code frames. */
  readonly sources: ReadonlyMap<string, string>;
}

export function parseOverrides(sets: readonly string[], diags: Diagnostic[]): Overrides {
  const train: Setting[] = [];
  const parallel: Setting[] = [];
  const sources = new Map<string, string>();
  sets.forEach((raw, i) => {
    const file = `--set #${i + 1}`;
    const m = /^\s*(train|parallel)\.([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$/s.exec(raw);
    if (!m || m[3]!.trim() === "") {
      sources.set(file, raw);
      diags.push(error("FSM510", `--set expects train.KEY=VALUE or parallel.KEY=VALUE, got '${raw}'`, spanAt(file, raw, 0, raw.length)));
      return;
    }
    const text = `${m[1]} { ${m[2]} = ${m[3]!.trim()} }`;
    sources.set(file, text);
    const { ast, diagnostics } = parseSource(file, text);
    const section = ast.items.find((x): x is SettingsSection => x.kind === "Train" || x.kind === "Parallel");
    if (diagnostics.length > 0 || !section || section.settings.length !== 1) {
      diags.push(...diagnostics);
      if (diagnostics.length === 0) diags.push(error("FSM510", `--set value '${m[3]!.trim()}' is not a single value`, spanAt(file, text, 0, text.length)));
      return;
    }
    (m[1] === "train" ? train : parallel).push(section.settings[0]!);
  });
  return { train, parallel, sources };
}

/** The file's section with overridden keys replaced (a missing section is created). */
export function applyOverrides(section: SettingsSection | undefined, overrides: readonly Setting[], kind: "Train" | "Parallel"): SettingsSection | undefined {
  if (overrides.length === 0) return section;
  const keys = new Set(overrides.map((s) => s.key.name));
  const kept = section ? section.settings.filter((s) => !keys.has(s.key.name)) : [];
  const first = overrides[0]!;
  return {
    kind,
    keyword: section?.keyword ?? { kind: "Ident", name: kind === "Train" ? "train" : "parallel", span: first.span },
    settings: [...kept, ...overrides],
    span: section?.span ?? first.span,
  };
}
