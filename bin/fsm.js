#!/usr/bin/env node
// fsm command-line entry: delegates to the compiled CLI so `npm link`/`npx fsm` work after `npm run build`,
// which compiles TypeScript into dist/src/ and bundles the CLI from there into dist/cli/ (scripts/bundle-cli.ts:
// a command loads a few modules instead of hundreds, a tenth of a second sooner).
let main;
try {
  ({ main } = await import("../dist/cli/main.js"));
} catch (e) {
  if (e.code !== "ERR_MODULE_NOT_FOUND" || !String(e.message).includes("dist/cli/main.js")) throw e;
  process.stderr.write("fsm is not built: run 'npm run build' (or 'npm ci') in fsm's directory first\n");
  process.exit(1);
}

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
