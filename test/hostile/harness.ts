// The hostile-input harness (issue 18): each case runs the real `fsm` binary (bin/fsm.js over dist/, as a
// user runs it) in a fresh directory and checks what a user must always get for bad input — exit 1 (usage:
// 2), one located message on stderr, no stack trace, no hang, and no file left behind other than complete
// ones the case names. Cases live in one file per kind next to this one.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { expect, it } from "vitest";

export const root = resolve(import.meta.dirname, "../..");
export const sample = (f: string): string => join(root, "samples", f);
export const fsmBin = join(root, "bin/fsm.js");

export interface HostileCase {
  /** What is wrong, as a user would say it. */
  readonly name: string;
  /** Prepares the case's directory (writes the corrupt plan, checkpoint, data file...); runs with cwd = dir. */
  readonly setup?: (dir: string) => void;
  /** The fsm arguments (after `fsm`); relative paths resolve inside the case's directory. */
  readonly argv: readonly string[] | ((dir: string) => readonly string[]);
  /** 1 for bad input (default), 2 for a usage mistake; 0 for a run that must end quietly (a reader closing
   *  the pipe early: `| head -1`), which then may print no error line at all. */
  readonly code?: 0 | 1 | 2;
  /** The located message the user must see (it names the file:line:col, JSON path, flag or file at fault). */
  readonly message: RegExp;
  /** Files (relative to the case's directory) the command may create; they must then be complete (check). */
  readonly creates?: readonly string[];
  /** Checks the case's directory after the run (e.g. that a checkpoint it must not touch is intact). */
  readonly after?: (dir: string) => void;
  /** Shell pipeline to run instead of plain spawning, e.g. `| head -c 10` (EPIPE cases); `FSM` is the binary. */
  readonly shell?: (fsm: string, dir: string) => string;
  /** How many error lines are allowed (default 1): a case may legitimately list every bad spot, up to a cap. */
  readonly maxMessages?: number;
  /** Seconds after which the run counts as a hang (default 20: a few seconds plus a loaded CI machine). */
  readonly hangSeconds?: number;
}

/** Every file under dir (relative paths, sorted), for the before/after comparison. */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

// A stack frame as Node prints it ("    at fn (file:1:2)") or an internal-error banner: never for bad input.
const STACK = /^\s+at .+:\d+:\d+\)?$/m;
// Lines that are messages: "file:1:2: error[FSM123]: ...", "fsm run: ...", "error: ..."
const MESSAGE = /(^|: )error(\[[A-Z0-9]+\])?: |^fsm [a-z]+: /gm;

export interface HostileResult { readonly code: number | null; readonly stdout: string; readonly stderr: string; readonly signal: string | null }

export function runHostile(c: HostileCase, dir: string): HostileResult {
  const argv = typeof c.argv === "function" ? c.argv(dir) : c.argv;
  const timeout = (c.hangSeconds ?? 20) * 1000;
  const env = { ...process.env, FORCE_COLOR: "0", NO_COLOR: "1" };
  const r = c.shell
    ? spawnSync("bash", ["-c", `set -o pipefail; ${c.shell(`node ${fsmBin}`, dir)}`], { cwd: dir, encoding: "utf8", timeout, env, killSignal: "SIGKILL" })
    : spawnSync(process.execPath, [fsmBin, ...argv], { cwd: dir, encoding: "utf8", timeout, env, killSignal: "SIGKILL", stdio: ["ignore", "pipe", "pipe"] });
  return { code: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "", signal: r.signal };
}

/** Declares one vitest case per hostile case. */
export function hostileCases(cases: readonly HostileCase[]): void {
  for (const c of cases) {
    it(c.name, () => {
      const dir = mkdtempSync(join(tmpdir(), "fsm-hostile-"));
      try {
        c.setup?.(dir);
        const before = new Set(filesUnder(dir));
        const r = runHostile(c, dir);
        const shown = `exit ${r.code} signal ${r.signal}\n--- stderr\n${r.stderr.slice(0, 4000)}\n--- stdout\n${r.stdout.slice(0, 1000)}`;
        expect(r.signal, `hung (killed after ${c.hangSeconds ?? 20} s)\n${shown}`).toBeNull();
        expect(r.code, shown).toBe(c.code ?? 1);
        expect(r.stderr, shown).toMatch(c.message);
        expect(r.stderr, shown).not.toMatch(STACK);
        expect(r.stderr, shown).not.toMatch(/internal error/);
        const messages = r.stderr.match(MESSAGE)?.length ?? 0;
        expect(messages, shown).toBeGreaterThanOrEqual(c.code === 0 ? 0 : 1);
        expect(messages, shown).toBeLessThanOrEqual(c.code === 0 ? 0 : (c.maxMessages ?? 1));
        const created = filesUnder(dir).filter((f) => !before.has(f));
        expect(created.filter((f) => !(c.creates ?? []).includes(f)), `left behind: ${created.join(", ")}`).toEqual([]);
        c.after?.(dir);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, ((c.hangSeconds ?? 20) + 10) * 1000);
  }
}
