// The value of a number literal, or why it has none: a literal must denote the number it spells. Integers
// beyond 2^53 - 1 would be silently rounded (9007199254740993 reads as ...992), huge exponents overflow to
// Infinity, and a nonzero literal may underflow to 0 — each is refused where it is written.
import { quoteSource } from "./tokens.js";

export type LiteralValue = { readonly value: number; readonly isInt: boolean } | { readonly problem: string };

export function literalValue(text: string): LiteralValue {
  const digits = text.replace(/_/g, "");
  const value = Number(digits);
  const isInt = !/[.eE]/.test(digits);
  const quoted = quoteSource(text);
  if (!Number.isFinite(value)) return { problem: `number literal ${quoted} is out of range (the largest is about 1.8e308)` };
  if (isInt && !Number.isSafeInteger(value)) {
    return { problem: `integer literal ${quoted} is beyond 2^53 - 1 = ${Number.MAX_SAFE_INTEGER}, the largest integer held exactly` };
  }
  // A mantissa with a nonzero digit that reads as 0 underflowed (1e-400).
  if (value === 0 && /[1-9]/.test(digits.replace(/[eE].*$/, ""))) return { problem: `number literal ${quoted} is too small: it rounds to 0` };
  return { value, isInt };
}
