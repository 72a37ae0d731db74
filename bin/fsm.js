#!/usr/bin/env node
// fsm command-line entry: delegates to the compiled CLI so `npm link`/`npx fsm` work after `npm run build`.
import { main } from "../dist/src/cli/main.js";

// A reader that stops early (`fsm run PLAN | head -1`) closes the pipe: what fsm would still print has nowhere
// to go, so fsm stops there, quietly and with exit 0, as ripgrep and other CLIs do — the reader chose to stop,
// and a stack trace for it would be noise. (Node ignores SIGPIPE, so the write fails with EPIPE instead.)
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (e) => {
    if (e.code === "EPIPE" || e.code === "ERR_STREAM_DESTROYED") process.exit(0);
    throw e;
  });
}

process.exitCode = await main(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  isTTY: process.stdout.isTTY === true,
});
