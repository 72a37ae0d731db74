// A small, strict command-line parser: declared flags only, `--flag value` or `--flag=value`, repeatable
// flags collected in order; anything unexpected is a usage error (exit code 2), never a guess.

export interface FlagSpec {
  readonly name: string;
  /** Takes a value (`--format dot`); otherwise a boolean switch. */
  readonly value?: boolean;
  readonly repeat?: boolean;
  readonly short?: string;
}

export interface ParsedArgs {
  readonly positionals: string[];
  readonly flags: Map<string, string[]>;
}

export class UsageError extends Error {}

export function parseArgs(argv: readonly string[], specs: readonly FlagSpec[]): ParsedArgs {
  const positionals: string[] = [];
  const flags = new Map<string, string[]>();
  const byName = new Map<string, FlagSpec>();
  for (const s of specs) {
    byName.set(`--${s.name}`, s);
    if (s.short) byName.set(`-${s.short}`, s);
  }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith("-") || a === "-") {
      positionals.push(a);
      continue;
    }
    if (a === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    const eq = a.indexOf("=");
    const key = eq > 0 && a.startsWith("--") ? a.slice(0, eq) : a;
    const spec = byName.get(key);
    if (!spec) throw new UsageError(`unknown option '${key}'`);
    let value = "true";
    if (spec.value) {
      if (eq > 0 && a.startsWith("--")) value = a.slice(eq + 1);
      else if (i + 1 < argv.length) value = argv[++i]!;
      else throw new UsageError(`option '${key}' needs a value`);
    } else if (eq > 0) throw new UsageError(`option '${key}' takes no value`);
    const list = flags.get(spec.name) ?? [];
    if (list.length > 0 && !spec.repeat) throw new UsageError(`option '--${spec.name}' given more than once`);
    list.push(value);
    flags.set(spec.name, list);
  }
  return { positionals, flags };
}

export function flag(args: ParsedArgs, name: string): string | undefined {
  return args.flags.get(name)?.[0];
}

/** A flag's whole-number value (undefined when the flag is absent). Refused with the flag named, as a usage
 *  error: anything but plain decimal digits (`1.5`, `-1`, `1e3`), a value below `min`, and a value beyond
 *  2^53 − 1, which a JavaScript number cannot hold exactly (`--steps 99999999999999999999` would be rounded). */
export function integerFlag(args: ParsedArgs, name: string, min: 0 | 1 = 1, kind = min === 1 ? "a positive integer" : "a non-negative integer"): number | undefined {
  const text = flag(args, name);
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || !Number.isSafeInteger(n)) {
    const why = /^\d+$/.test(text) && !Number.isSafeInteger(n) ? ` of at most ${Number.MAX_SAFE_INTEGER}` : "";
    throw new UsageError(`--${name} must be ${kind}${why}, got '${text}'`);
  }
  return n;
}
