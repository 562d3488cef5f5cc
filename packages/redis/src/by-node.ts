/**
 * A flush's `batches` (each of one slot) by the node `nodeOf` names for its slot now, in their
 * order; `undefined` when that is one node, as it is unless a slot moved since its ops were queued.
 */
export function byNode<T extends { readonly slot: number }>(
  batches: readonly (readonly T[])[],
  nodeOf: (slot: number) => string,
): (readonly T[])[][] | undefined {
  const first = nodeOf(batches[0]![0]!.slot);
  let parts: Map<string, (readonly T[])[]> | undefined;
  for (let i = 1; i < batches.length; i++) {
    const node = nodeOf(batches[i]![0]!.slot);
    if (parts === undefined) {
      if (node === first) continue;
      parts = new Map([[first, batches.slice(0, i)]]);
    }
    const part = parts.get(node);
    if (part === undefined) parts.set(node, [batches[i]!]);
    else part.push(batches[i]!);
  }
  return parts === undefined ? undefined : [...parts.values()];
}
