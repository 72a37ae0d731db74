// Corrupt plans (issue 18): every command that loads a plan refuses each hand edit with one message naming the
// JSON path at fault (or the content hash, for an edit that keeps the plan consistent), before doing any work.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe } from "vitest";
import { commands, corruptions } from "./corrupt-plan.js";
import { hostileCases, type HostileCase } from "./harness.js";

for (const argv of commands) {
  describe(`corrupt plans: fsm ${argv[0]}`, () =>
    hostileCases(
      corruptions.map((c): HostileCase => ({
        name: c.name,
        setup: (dir) => writeFileSync(join(dir, "p.json"), c.text()),
        argv,
        message: c.message,
      })),
    ));
}
