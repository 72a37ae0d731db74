// The path-kind checks: what a path to read or write must be, and the reasons given when it is not — a FIFO or
// a directory where a file is read, a directory or a missing directory where a file is written, /proc.
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, readSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { checkReadableDir, checkReadableFile, checkWritableDir, checkWritableFile, openRegularFile, PathError } from "../../src/files/path-kind.js";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "fsm-path-kind-"));
  writeFileSync(join(dir, "file"), "abc");
  mkdirSync(join(dir, "sub"));
  execFileSync("mkfifo", [join(dir, "fifo")]);
});
const at = (p: string): string => join(dir, p);

/** The PathError `f` throws (its reason), or undefined when it throws none. */
function reason(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    if (!(e instanceof PathError)) throw e;
    return e.reason;
  }
}

describe("files to read", () => {
  it("a regular file passes, and opens without blocking", () => {
    expect(reason(() => checkReadableFile(at("file"), "token file"))).toBeUndefined();
    const fd = openRegularFile(at("file"), "token file");
    const b = Buffer.alloc(3);
    expect(readSync(fd, b, 0, 3, 0)).toBe(3);
    closeSync(fd);
    expect(b.toString()).toBe("abc");
  });

  it("a FIFO, a directory, /dev/null and a missing file are refused with what they are", () => {
    for (const check of [checkReadableFile, openRegularFile]) {
      // A FIFO with no writer: the check must return, not block on it.
      expect(reason(() => check(at("fifo"), "token file"))).toBe("is a FIFO (named pipe), not a regular file");
      expect(reason(() => check(at("sub"), "token file"))).toBe("is a directory, not a regular file");
      expect(reason(() => check("/dev/null", "--init"))).toBe("is a device, not a regular file");
      expect(reason(() => check(at("none"), "token file"))).toMatch(/no such file/i);
    }
  });

  it("the message names whose path it is and the path", () => {
    expect(() => checkReadableFile(at("sub"), "--init")).toThrow(`--init ${at("sub")}: is a directory, not a regular file`);
  });
});

describe("files to write", () => {
  it("a new or existing regular file in a directory passes", () => {
    expect(reason(() => checkWritableFile(at("new.json"), "-o"))).toBeUndefined();
    expect(reason(() => checkWritableFile(at("file"), "-o"))).toBeUndefined();
  });

  it("a directory, a FIFO, a missing directory, a file as the directory and /proc are refused", () => {
    expect(reason(() => checkWritableFile(at("sub"), "-o"))).toBe("is a directory; give a file name inside it");
    expect(reason(() => checkWritableFile(at("fifo"), "--trace"))).toBe("is a FIFO (named pipe), not a regular file");
    expect(reason(() => checkWritableFile(at("no/such/x.json"), "-o"))).toMatch(/its directory .*no\/such does not exist/);
    expect(reason(() => checkWritableFile(at("file/x.json"), "-o"))).toMatch(/file is a regular file, not a directory/);
    expect(reason(() => checkWritableFile("/proc/trace.json", "--trace"))).toBe("/proc is the kernel's virtual file system, not a place to write files");
    expect(reason(() => checkWritableFile("/sys/kernel/x", "--trace"))).toMatch(/^\/sys is the kernel's virtual file system/);
  });
});

describe("directories", () => {
  it("a directory to write may exist or be made below an existing writable one; nothing is created", () => {
    expect(reason(() => checkWritableDir(at("sub"), "--save"))).toBeUndefined();
    expect(reason(() => checkWritableDir(at("a/b/c"), "--save"))).toBeUndefined();
    expect(reason(() => checkReadableDir(at("a"), "--resume"))).toBe("no such directory");
  });

  it("a file, a file on the way, /proc and /sys are refused", () => {
    expect(reason(() => checkWritableDir(at("file"), "--save"))).toBe("is a regular file, not a directory");
    expect(reason(() => checkWritableDir(at("file/ckpt"), "--save"))).toMatch(/file is a regular file, not a directory/);
    expect(reason(() => checkWritableDir("/proc/ckpt", "--save"))).toBe("/proc is the kernel's virtual file system, not a place to write files");
    expect(reason(() => checkWritableDir("/proc", "--save"))).toMatch(/^\/proc is the kernel's/);
    expect(reason(() => checkWritableDir("/sys/fsm/ckpt", "--save"))).toMatch(/^\/sys is the kernel's/);
  });

  it("a directory to read must be one", () => {
    expect(reason(() => checkReadableDir(at("sub"), "--resume"))).toBeUndefined();
    expect(reason(() => checkReadableDir(at("file"), "--resume"))).toBe("is a regular file, not a directory");
  });
});
