// Plain-text tables for terminal reports (CLI and viz alike): columns padded to their widest cell.

/** Column-aligned lines: the first `leftColumns` columns (names) left-aligned, the rest (numbers) right. */
export function tableLines(header: readonly string[], rows: readonly (readonly string[])[], leftColumns = 1): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i < leftColumns ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ").trimEnd();
  return [line(header), ...rows.map(line)];
}
