// Human-readable quantities (counts, FLOPs, bytes, seconds) shared by the CLI's reports and viz's renderers;
// it imports nothing, so any phase that prints numbers can use it without depending on another.

/** `1,234,567`. */
export const count = (n: number): string => n.toLocaleString("en-US");

/** FLOPs with an SI prefix: `1.23 PFLOP`. */
export function formatFlops(n: number): string {
  if (n === 0) return "0";
  const units = ["", "K", "M", "G", "T", "P", "E", "Z"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return `${n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2)} ${units[i]}FLOP`;
}

/** Bytes in binary units: `1.50 GiB`. */
export function formatBytes(n: number): string {
  if (n === 0) return "0";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2)} ${units[i]}`;
}

/** A duration in the unit that keeps it short: `12.0 µs`, `3.4 ms`, `1.25 s`, `2.0 min`, `1.5 h`. */
export function formatSeconds(s: number): string {
  if (s === 0) return "0";
  if (s < 1e-3) return `${(s * 1e6).toFixed(1)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(1)} ms`;
  if (s < 120) return `${s.toFixed(2)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** A count with its noun, singular for one: `1 step`, `3 steps`, `1 device`; `plural` for irregular nouns. */
export function plural(n: number, noun: string, many = `${noun}s`): string {
  return `${count(n)} ${n === 1 ? noun : many}`;
}
