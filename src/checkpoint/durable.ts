// Writes that survive a crash or power loss at any moment: a file's bytes are fsync'd before the rename
// that publishes it, and the directory is fsync'd after, so the rename itself is on disk. A checkpoint's
// manifest is published this way last; until it is, what the save wrote is invisible to a resume.
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** fsync a directory: makes renames and new entries in it durable (Linux; a no-op where unsupported). */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // Some platforms cannot open or fsync a directory; the data itself was fsync'd.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** `text` at `path`: a temporary file in the same directory, fsync, rename, fsync the directory. */
export function writeDurably(path: string, text: string): void {
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  const fd = openSync(temp, "w");
  try {
    writeSync(fd, text);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temp, path);
  } catch (e) {
    rmSync(temp, { force: true });
    throw e;
  }
  fsyncDir(dirname(path));
}
