/**
 * The lines a README example says it prints: each `// → line` comment, in order (several on one
 * comment for a statement that prints more than once: `// → a → b`), an explanation after ` — `
 * left out. One convention for every README, so an example's comments are checked wherever it runs.
 */
export function promisedLines(code: string): string[] {
  return [...code.matchAll(/\/\/ → (.*)$/gm)].flatMap((m) =>
    m[1]!.split(' → ').map((line) => line.split(' — ')[0]!.trim()),
  );
}

/** The `wanted` lines found in `lines`, each after the one before it: `wanted` itself if all are. */
export function inOrder(lines: readonly string[], wanted: readonly string[]): string[] {
  const found: string[] = [];
  let from = 0;
  for (const line of wanted) {
    const at = lines.indexOf(line, from);
    if (at === -1) break;
    found.push(line);
    from = at + 1;
  }
  return found;
}
