/** Plain-text tables for the CLI's listings. */

/** Rows under a header, columns padded to their widest cell (the last one left as it is), each line indented. */
export function table(head: string[], rows: string[][], indent = '  '): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [head, ...rows].map((cols) =>
    `${indent}${cols.map((c, i) => (i === cols.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')}`.trimEnd(),
  );
}
