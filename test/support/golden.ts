// Golden files under test/golden: compared as they are, rewritten with FSM_UPDATE_GOLDEN=1 (then review the
// diff), shared by every golden test.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { expect } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const update = process.env["FSM_UPDATE_GOLDEN"] === "1";

export function golden(name: string, actual: string): void {
  const path = join(root, "test/golden", name);
  if (update) writeFileSync(path, actual);
  expect(existsSync(path), `missing golden ${name}: run with FSM_UPDATE_GOLDEN=1 and review it`).toBe(true);
  expect(actual).toBe(readFileSync(path, "utf8"));
}
