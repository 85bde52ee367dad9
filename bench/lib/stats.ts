// Percentiles and Markdown tables for the printed report.

export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  // Nearest rank: p99 of 200 samples is the 198th value.
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function mean(samples: readonly number[]): number {
  return samples.reduce((sum, value) => sum + value, 0) / Math.max(1, samples.length);
}

export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
}

export function ms(value: number, digits = 2): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "n/a";
}

export function table(title: string, header: string[], rows: (string | number)[][], notes: string[] = []): string {
  const cells = [header, ...rows.map((row) => row.map(String))];
  const widths = header.map((_, column) => Math.max(3, ...cells.map((row) => (row[column] ?? "").length)));
  const line = (row: string[]) => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(" | ")} |`;
  return [
    `### ${title}`,
    "",
    line(cells[0]!),
    `|${widths.map((width) => "-".repeat(width + 2)).join("|")}|`,
    ...cells.slice(1).map(line),
    ...(notes.length > 0 ? ["", ...notes.map((note) => `_${note}_`)] : []),
    "",
  ].join("\n");
}
