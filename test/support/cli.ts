// Runs the fsm CLI in-process (through main()) and captures its exit code, stdout and stderr.
import { main } from "../../src/cli/main.js";

export async function runCli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s) });
  return { code, stdout, stderr };
}
