// Which rows of a step's global batch a reader reads: a data-parallel rank reads only its own replica's
// rows (FairScale/PyTorch's DistributedSampler contract), and the rows of every rank together are the
// global batch, in order — so the sample sequence does not depend on how many ranks read it.
import { DataError } from "./data-error.js";

export interface RowSlice {
  readonly from: number;
  readonly count: number;
}

/** The slice asked for (the whole batch when none), checked against the batch size. */
export function rowsOf(batch: number, rows?: RowSlice): RowSlice {
  if (!rows) return { from: 0, count: batch };
  const { from, count } = rows;
  if (!Number.isInteger(from) || !Number.isInteger(count) || from < 0 || count < 1 || from + count > batch) {
    throw new DataError(`rows [${from}, ${from + count}) are not within the batch of ${batch}`);
  }
  return rows;
}
