// Size-capped buckets of parameters: the unit in which gradients are all-reduced or reduced, and updated
// weights broadcast, so that many small tensors share one collective's latency.
import type { Bucket } from "./types.js";

/** `bucketMB` is in MiB, as PyTorch DDP's bucket_cap_mb (25 → 26,214,400 bytes). */
export function bucketCapBytes(bucketMB: number): number {
  if (!(Number.isFinite(bucketMB) && bucketMB > 0)) throw new Error(`internal: bucket size must be a positive number of MB, got ${bucketMB}`);
  return Math.floor(bucketMB * 1024 * 1024);
}

export interface BucketItem {
  readonly name: string;
  readonly numel: number;
}

/**
 * Packs items, in the given order, into consecutive buckets of at most `capBytes` (elements × bytesPerElement).
 * A bucket closes when the next item would overflow it; an item larger than the cap travels alone (as in
 * DDP, the cap bounds how long the first collective waits, it never splits a tensor). Indices start at
 * `firstIndex` so several owners' buckets can share one numbering.
 */
export function packBuckets(
  items: readonly BucketItem[],
  bytesPerElement: number,
  capBytes: number,
  firstIndex = 0,
  owner?: number,
): Bucket[] {
  const out: Bucket[] = [];
  let names: string[] = [];
  let numel = 0;
  const close = (): void => {
    if (names.length === 0) return;
    const b = { index: firstIndex + out.length, params: names, numel, bytes: numel * bytesPerElement };
    out.push(owner === undefined ? b : { ...b, owner });
    names = [];
    numel = 0;
  };
  for (const it of items) {
    if (names.length > 0 && (numel + it.numel) * bytesPerElement > capBytes) close();
    names.push(it.name);
    numel += it.numel;
  }
  close();
  return out;
}

/**
 * Per-owner buckets: items keep their order, each owner's items are packed separately (a bucket goes to
 * one root), and buckets are numbered in the order they complete, that is by their last item's position.
 */
export function packOwnerBuckets(
  items: readonly BucketItem[],
  owners: ReadonlyMap<string, number>,
  ranks: number,
  bytesPerElement: number,
  capBytes: number,
): Bucket[] {
  const position = new Map(items.map((it, i) => [it.name, i]));
  const all: Bucket[] = [];
  for (let r = 0; r < ranks; r++) {
    const mine = items.filter((it) => owners.get(it.name) === r);
    all.push(...packBuckets(mine, bytesPerElement, capBytes, 0, r));
  }
  const last = (b: Bucket): number => position.get(b.params[b.params.length - 1]!)!;
  return all.sort((a, b) => last(a) - last(b)).map((b, index) => ({ ...b, index }));
}
