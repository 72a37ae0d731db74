// What the file-backed data sources (token files, .npy arrays) share: opening a file with a DataError that
// says which file and why, positioned reads straight into typed arrays (the files are little-endian, read in
// the host's order as the checkpoint loaders read safetensors), and opening a source only once its first
// batch has been read, closing its files when anything fails.
import { readSync } from "node:fs";
import { openRegularFile, PathError } from "../files/path-kind.js";
import type { Batch } from "../interp/session.js";
import { DataError } from "./data-error.js";

/** `path` opened for reading, a regular file only (a FIFO would block, a directory fails its first read);
 *  when it cannot be, a DataError `${what}: ${why}`. */
export function openFile(path: string, what: string): number {
  try {
    return openRegularFile(path, what);
  } catch (e) {
    if (e instanceof PathError) throw new DataError(`${what}: ${e.reason}`);
    throw e;
  }
}

let bytesRead = 0;

/** Bytes this process has read from data files so far (a process under mpirun reads its own rows only). */
export function dataBytesRead(): number {
  return bytesRead;
}

/** Fills `length` bytes of `into` from `offset` on with the file's bytes at `position`; false when the file ends first. */
export function readFully(fd: number, into: NodeJS.ArrayBufferView, position: number, offset = 0, length = into.byteLength - offset): boolean {
  const n = readSync(fd, into, offset, length, position);
  bytesRead += n;
  return n === length;
}

/** The source `open` makes, once its first batch is read (every check that needs the data itself, before
 *  training starts); if opening or that read fails, `close()` (its files so far) and the error is thrown on. */
export function openChecked<T extends { batch(step: number): Batch }>(close: () => void, open: () => T): T {
  try {
    const data = open();
    data.batch(0);
    return data;
  } catch (e) {
    close();
    throw e;
  }
}
