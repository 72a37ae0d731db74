// chevrotain, loaded from the single-file ES module build its package ships (lib/chevrotain.mjs, the same
// release as the module tree its "exports" entry points at). That tree imports lodash-es as some 640 modules
// of its own, which took 0.45 s of the 0.65 s every fsm command spent starting; the one file takes 0.08 s.
// Every runtime use of chevrotain goes through here, so one copy is loaded (EOF and token types compare by
// identity); its types still come from "chevrotain".
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

// The package's exported entry is lib/src/api.js; the bundle sits beside lib/src.
const entry = createRequire(import.meta.url).resolve("chevrotain");
const chevrotain = (await import(pathToFileURL(join(dirname(entry), "..", "chevrotain.mjs")).href)) as typeof import("chevrotain");

export const { CstParser, EOF, Lexer, createSyntaxDiagramsCode, createToken, tokenMatcher } = chevrotain;
