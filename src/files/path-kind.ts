// What kind of thing a path the tool reads or writes is, checked before it is used: a file to read must be a
// regular file (a FIFO blocks its reader until someone writes, a device never ends, a directory cannot be
// read as one), a file to write must be creatable in a directory we may write (not a directory itself), and
// a directory to write must be one or creatable. The kernel's virtual file systems (/proc, /sys) are never a
// place to write: Node's recursive mkdir spins forever there. Every error is a PathError naming the path.
import { accessSync, closeSync, constants, fstatSync, openSync, realpathSync, statSync, type Stats } from "node:fs";
import { dirname, resolve, sep } from "node:path";

/** A path of the wrong kind; `what` says whose path it is (`--trace`, `token file`), `reason` what is wrong. */
export class PathError extends Error {
  constructor(readonly path: string, readonly what: string, readonly reason: string) {
    super(`${what} ${path}: ${reason}`);
  }
}

/** The kind of a non-regular file, as a user would name it. */
export function kindOf(s: Stats): string {
  if (s.isDirectory()) return "a directory";
  if (s.isFIFO()) return "a FIFO (named pipe)";
  if (s.isSocket()) return "a socket";
  if (s.isCharacterDevice() || s.isBlockDevice()) return "a device";
  return s.isFile() ? "a regular file" : "not a regular file";
}

const reasonOf = (e: unknown): string => (e as NodeJS.ErrnoException).code ?? (e as Error).message;

/** What is at `p` (undefined when nothing is); `path` and `what` name the path being checked in an error. */
function statOrUndefined(p: string, path: string, what: string): Stats | undefined {
  try {
    return statSync(p);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new PathError(path, what, `cannot examine ${p} (${reasonOf(e)})`);
  }
}

/** The kernel's virtual file systems, where nothing of ours may be written. */
const VIRTUAL = ["/proc", "/sys"];

function inVirtualFs(path: string): string | undefined {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    real = resolve(path);
  }
  return VIRTUAL.find((v) => real === v || real.startsWith(v + sep));
}

/** The nearest ancestor of `path` (itself excluded) that exists. */
function existingAncestor(path: string, what: string): { dir: string; stats: Stats } {
  let dir = dirname(resolve(path));
  for (;;) {
    const s = statOrUndefined(dir, path, what);
    if (s) return { dir, stats: s };
    const up = dirname(dir);
    if (up === dir) throw new Error(`internal: no existing ancestor of ${path}`);
    dir = up;
  }
}

/** `path` is a regular file this process can open for reading. */
export function checkReadableFile(path: string, what: string): void {
  let s: Stats;
  try {
    s = statSync(path);
  } catch (e) {
    throw new PathError(path, what, (e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : `cannot read it (${reasonOf(e)})`);
  }
  if (!s.isFile()) throw new PathError(path, what, `is ${kindOf(s)}, not a regular file`);
  try {
    accessSync(path, constants.R_OK);
  } catch (e) {
    throw new PathError(path, what, `cannot read it (${reasonOf(e)})`);
  }
}

/** `path` opened for reading, and only if it is a regular file: opened without blocking (a FIFO would block
 *  the open itself until a writer came), then checked on the descriptor, so a path swapped between a check
 *  and the open cannot slip through. */
export function openRegularFile(path: string, what: string): number {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    // The system's reason without its echo of the path: "ENOENT: no such file or directory".
    throw new PathError(path, what, (e as Error).message.replace(/, open '.*'$/, ""));
  }
  const s = fstatSync(fd);
  if (!s.isFile()) {
    closeSync(fd);
    throw new PathError(path, what, `is ${kindOf(s)}, not a regular file`);
  }
  return fd;
}

/** `path` can be written as a whole file: it is a regular file or absent, in a directory we may write. */
export function checkWritableFile(path: string, what: string): void {
  const s = statOrUndefined(path, path, what);
  if (s?.isDirectory()) throw new PathError(path, what, "is a directory; give a file name inside it");
  if (s && !s.isFile()) throw new PathError(path, what, `is ${kindOf(s)}, not a regular file`);
  const dir = dirname(resolve(path));
  const parent = statOrUndefined(dir, path, what);
  if (!parent) throw new PathError(path, what, `its directory ${dirname(path)} does not exist`);
  if (!parent.isDirectory()) throw new PathError(path, what, `${dirname(path)} is ${kindOf(parent)}, not a directory`);
  const virtual = inVirtualFs(dir);
  if (virtual) throw new PathError(path, what, `${virtual} is the kernel's virtual file system, not a place to write files`);
  try {
    accessSync(dir, constants.W_OK);
  } catch (e) {
    throw new PathError(path, what, `cannot write in ${dirname(path)} (${reasonOf(e)})`);
  }
}

/** `dir` is a directory we may write in, or can be made as one (its nearest existing ancestor is a directory
 *  we may write in). Nothing is created: the caller makes it when it is about to write. */
export function checkWritableDir(dir: string, what: string): void {
  const s = statOrUndefined(dir, dir, what);
  if (s && !s.isDirectory()) throw new PathError(dir, what, `is ${kindOf(s)}, not a directory`);
  const target = s ? { dir, stats: s } : existingAncestor(dir, what);
  const virtual = inVirtualFs(target.dir);
  if (virtual) throw new PathError(dir, what, `${virtual} is the kernel's virtual file system, not a place to write files`);
  if (!target.stats.isDirectory()) throw new PathError(dir, what, `${target.dir} is ${kindOf(target.stats)}, not a directory`);
  try {
    accessSync(target.dir, constants.W_OK);
  } catch (e) {
    throw new PathError(dir, what, `cannot write in ${target.dir} (${reasonOf(e)})`);
  }
}

/** `dir` exists and is a directory. */
export function checkReadableDir(dir: string, what: string): void {
  const s = statOrUndefined(dir, dir, what);
  if (!s) throw new PathError(dir, what, "no such directory");
  if (!s.isDirectory()) throw new PathError(dir, what, `is ${kindOf(s)}, not a directory`);
}
