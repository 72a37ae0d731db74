#!/usr/bin/env node
// fsm command-line entry: delegates to the compiled CLI so `npm link`/`npx fsm` work after `npm run build`.
import { main } from "../dist/src/cli/main.js";

process.exitCode = await main(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  isTTY: process.stdout.isTTY === true,
});
