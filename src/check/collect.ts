// Collects the top-level declarations of all loaded files into one namespace: constants, blocks, the model,
// and the train/parallel sections, reporting duplicates (within a file FSM301, across files FSM202).
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import { languageOp } from "../graph/registry.js";
import type { BlockDecl, ConstDecl, Ident, ModelDecl, SettingsSection } from "../parse/ast.js";
import type { LoadedFile } from "./load.js";

export interface Declarations {
  readonly consts: ReadonlyMap<string, ConstDecl>;
  readonly blocks: ReadonlyMap<string, BlockDecl>;
  readonly model: ModelDecl | undefined;
  readonly train: SettingsSection | undefined;
  readonly parallel: SettingsSection | undefined;
}

export function collectDeclarations(files: readonly LoadedFile[], diags: Diagnostic[]): Declarations {
  const consts = new Map<string, ConstDecl>();
  const blocks = new Map<string, BlockDecl>();
  const defined = new Map<string, Ident>();
  let model: ModelDecl | undefined;
  let train: SettingsSection | undefined;
  let parallel: SettingsSection | undefined;

  const claim = (id: Ident): boolean => {
    const prev = defined.get(id.name);
    if (prev) {
      const where = `${prev.span.file}:${prev.span.line}:${prev.span.column}`;
      const sameFile = prev.span.file === id.span.file;
      diags.push(
        error(sameFile ? "FSM301" : "FSM202", `'${id.name}' is already defined at ${where}`, id.span),
      );
      return false;
    }
    defined.set(id.name, id);
    return true;
  };

  for (const f of files) {
    for (const item of f.ast.items) {
      switch (item.kind) {
        case "Const":
          if (claim(item.name)) consts.set(item.name.name, item);
          break;
        case "Block":
          if (languageOp(item.name.name)) {
            diags.push(error("FSM301", `block '${item.name.name}' has the name of a built-in op`, item.name.span));
          } else if (claim(item.name)) blocks.set(item.name.name, item);
          break;
        case "Model":
          if (model) {
            const p = model.name.span;
            diags.push(
              error("FSM308", `only one model is allowed; '${model.name.name}' is defined at ${p.file}:${p.line}:${p.column}`, item.name.span),
            );
          } else model = item;
          break;
        case "Train":
        case "Parallel": {
          const prev = item.kind === "Train" ? train : parallel;
          if (prev) {
            const p = prev.keyword.span;
            diags.push(error("FSM311", `a second '${item.keyword.name}' section; the first is at ${p.file}:${p.line}:${p.column}`, item.keyword.span));
          } else if (item.kind === "Train") train = item;
          else parallel = item;
          break;
        }
        case "Import":
          break;
      }
    }
  }
  return { consts, blocks, model, train, parallel };
}
