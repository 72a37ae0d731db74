// Elaboration: instantiates the model's members into an instance tree, evaluating constants, block
// arguments (with defaults), repeat stacks and op attributes, creating hierarchical names and detecting
// recursive blocks. Forward code is executed afterwards by build-graph.ts.
import { error, type Diagnostic } from "../diagnostics/diagnostic.js";
import { shapeEq, shapeToString } from "../graph/dim.js";
import type { OpDef } from "../graph/op-def.js";
import { languageOp, languageOps } from "../graph/registry.js";
import { typeToString } from "../graph/types-format.js";
import type { Attrs, AttrValue } from "../graph/types.js";
import type { BlockDecl, BodyItem, CallExpr, Expr, ForwardDecl, MemberDecl, ModelDecl } from "../parse/ast.js";
import { readAnnotations } from "./annotations.js";
import { bindArgs } from "./bind-args.js";
import type { Declarations } from "./collect.js";
import { evalExpr, isParamRef } from "./const-eval.js";
import { BLOCK_PARAM_TYPES, convertBlockArg, evalAttr } from "./convert.js";
import { Scope, type Env } from "./env.js";
import { childPath, mergeAnnotations, type Annotations, type BlockInstance, type Instance, type OpInstance } from "./instances.js";
import { didYouMean } from "./suggest.js";
import { describe } from "./values.js";

export interface ElaboratedModel {
  readonly root: BlockInstance;
  readonly forward: ForwardDecl | undefined;
  /** Every op instance by path, so tied parameters can be created on demand. */
  readonly opInstances: ReadonlyMap<string, OpInstance>;
}

export class Elaborator {
  private readonly opInstances = new Map<string, OpInstance>();
  private readonly blockStack: string[] = [];

  constructor(
    private readonly diags: Diagnostic[],
    private readonly decls: Declarations,
    private readonly globals: Env,
  ) {}

  elaborateModel(model: ModelDecl): ElaboratedModel {
    const env = new Scope(this.globals);
    const { members, forward } = this.elaborateBody(model.body, env, "", model.name.name);
    if (!forward) this.diags.push(error("FSM312", `model '${model.name.name}' has no forward(...)`, model.name.span));
    const root: BlockInstance = {
      kind: "block",
      path: "",
      decl: { kind: "Block", annotations: model.annotations, name: model.name, params: [], body: model.body, span: model.span },
      env,
      members,
      annotations: readAnnotations(this.diags, model.annotations, env),
      span: model.span,
    };
    return { root, forward, opInstances: this.opInstances };
  }

  /** Constants and members in source order (a member may use constants defined above it). */
  private elaborateBody(body: readonly BodyItem[], env: Scope, path: string, owner: string) {
    const members = new Map<string, Instance>();
    let forward: ForwardDecl | undefined;
    for (const item of body) {
      if (item.kind === "Forward") {
        if (forward) this.diags.push(error("FSM301", `'${owner}' has more than one forward`, item.span));
        else forward = item;
        continue;
      }
      const name = item.name.name;
      if (env.hasOwn(name)) {
        this.diags.push(error("FSM301", `'${name}' is already defined in '${owner}'`, item.name.span));
        continue;
      }
      if (item.kind === "Const") {
        env.define(name, evalExpr({ diags: this.diags }, item.value, env));
        continue;
      }
      const inst = this.elaborateMember(item, env, childPath(path, name));
      if (inst) {
        members.set(name, inst);
        env.define(name, { k: "instance", inst });
      } else env.define(name, { k: "error" });
    }
    return { members, forward };
  }

  private elaborateMember(m: MemberDecl, env: Env, path: string): Instance | undefined {
    const annotations = readAnnotations(this.diags, m.annotations, env);
    if (!m.repeat) return this.instantiate(m.init, env, path, annotations);
    const count = evalExpr({ diags: this.diags }, m.repeat.count, env);
    if (count.k === "error") return undefined;
    if (count.k !== "int" || count.v < 1) {
      this.diags.push(error("FSM409", `repeat needs a count >= 1, got ${describe(count)}`, m.repeat.count.span));
      return undefined;
    }
    const items: Instance[] = [];
    for (let i = 0; i < count.v; i++) {
      const itemEnv = new Scope(env);
      if (m.repeat.index) itemEnv.define(m.repeat.index.name, { k: "int", v: i });
      const inst = this.instantiate(m.init, itemEnv, childPath(path, String(i)), annotations);
      if (!inst) return undefined; // the same mistake would repeat for every element: report it once
      items.push(inst);
    }
    return { kind: "repeat", path, items, annotations, span: m.span };
  }

  private instantiate(call: CallExpr, env: Env, path: string, annotations: Annotations): Instance | undefined {
    if (call.callee.kind !== "Name") {
      this.diags.push(error("FSM405", "a member must be an op or block call such as linear(d, 4 * d)", call.callee.span));
      return undefined;
    }
    const name = call.callee.name;
    const block = this.decls.blocks.get(name);
    if (block) return this.instantiateBlock(block, call, env, path, annotations);
    const op = languageOp(name);
    if (op && op.kind === "module") return this.instantiateOp(op, call, env, path, annotations);
    if (op) {
      this.diags.push(error("FSM405", `'${name}' has no parameters: call it in forward (${name}(x)) instead of declaring a member`, call.callee.span));
      return undefined;
    }
    const known = [...this.decls.blocks.keys(), ...languageOps().filter((o) => o.kind === "module").map((o) => o.name)];
    this.diags.push(error("FSM302", `unknown op or block '${name}'`, call.callee.span, didYouMean(name, known)));
    return undefined;
  }

  private instantiateBlock(decl: BlockDecl, call: CallExpr, env: Env, path: string, annotations: Annotations): BlockInstance | undefined {
    const name = decl.name.name;
    if (this.blockStack.includes(name)) {
      const cycle = [...this.blockStack.slice(this.blockStack.indexOf(name)), name].join(" → ");
      this.diags.push(error("FSM307", `block '${name}' contains itself: ${cycle}`, call.callee.span));
      return undefined;
    }
    const what = `block '${name}'`;
    const slots = decl.params.map((p) => ({ name: p.name.name, required: p.default === undefined }));
    const bound = bindArgs(this.diags, what, slots, call.args, call.span);
    if (!bound) return undefined;
    // Parameters see the globals and the parameters before them (for defaults such as `hidden: int = 4 * d`).
    const blockEnv = new Scope(this.globals);
    for (const p of decl.params) {
      const type = p.type?.name ?? "int";
      if (!(BLOCK_PARAM_TYPES as readonly string[]).includes(type)) {
        this.diags.push(error("FSM401", `unknown parameter type '${type}' (use int, float, bool or str)`, p.type?.span ?? p.span, didYouMean(type, BLOCK_PARAM_TYPES)));
        return undefined;
      }
      const argExpr = bound.get(p.name.name);
      const [expr, evalEnv] = argExpr ? [argExpr, env] : [p.default!, blockEnv];
      const v = convertBlockArg(this.diags, type, evalExpr({ diags: this.diags }, expr, evalEnv), expr.span, `argument '${p.name.name}' of ${what}`);
      if (!v) return undefined;
      if (blockEnv.hasOwn(p.name.name)) {
        this.diags.push(error("FSM301", `parameter '${p.name.name}' is declared twice`, p.name.span));
        return undefined;
      }
      blockEnv.define(p.name.name, v);
    }
    this.blockStack.push(name);
    const bodyEnv = new Scope(blockEnv);
    const { members, forward } = this.elaborateBody(decl.body, bodyEnv, path, name);
    this.blockStack.pop();
    if (!forward) {
      this.diags.push(error("FSM312", `block '${name}' has no forward(...)`, decl.name.span));
      return undefined;
    }
    return {
      kind: "block",
      path,
      decl,
      env: bodyEnv,
      members,
      annotations: mergeAnnotations(readAnnotations(this.diags, decl.annotations, this.globals), annotations),
      span: call.span,
    };
  }

  private instantiateOp(op: OpDef, call: CallExpr, env: Env, path: string, annotations: Annotations): OpInstance | undefined {
    const bound = bindOpCall(this.diags, op, [], call, env);
    if (!bound) return undefined;
    const attrs = bound.attrs;
    const bad = op.validate?.(attrs);
    if (bad) {
      this.diags.push(error(bad.code, bad.message, call.span));
      return undefined;
    }
    const specs = op.params?.(attrs) ?? [];
    const tieRef = attrs["tie"];
    let tie: OpInstance["tie"];
    if (isParamRef(tieRef) && op.tieParam) {
      const spec = specs.find((s) => s.name === op.tieParam);
      if (!spec) {
        this.diags.push(error("FSM408", `${op.name} has no '${op.tieParam}' to tie here`, call.span));
        return undefined;
      }
      // The tied tensor replaces the op's own parameter one for one, so the shapes must agree exactly.
      if (!shapeEq(spec.shape, tieRef.type.shape)) {
        this.diags.push(
          error("FSM408", `cannot tie '${childPath(path, spec.name)}': ${op.name} needs ${shapeToString(spec.shape)}, but '${tieRef.name}' is ${typeToString(tieRef.type)}`, call.span),
        );
        return undefined;
      }
      tie = { local: spec.name, target: tieRef.name };
    }
    const inst: OpInstance = {
      kind: "op",
      path,
      def: op,
      attrs,
      params: tie ? specs.filter((s) => s.name !== tie!.local) : specs,
      specs,
      ...(tie ? { tie } : {}),
      annotations,
      span: call.span,
    };
    this.opInstances.set(path, inst);
    return inst;
  }
}

/** Binds a call's arguments to an op's tensor operands (`inputs`, only for function ops) and attributes,
 * converting attributes by their declared types. Operand expressions come back unevaluated. */
export function bindOpCall(
  diags: Diagnostic[],
  op: OpDef,
  inputs: readonly string[],
  call: CallExpr,
  env: Env,
): { attrs: Attrs; operands: Expr[] } | undefined {
  const slots = [
    ...inputs.map((name) => ({ name, required: true })),
    ...op.attrs.filter((s) => !s.passOnly).map((s) => ({ name: s.name, required: s.default === undefined && !s.optional })),
  ];
  const bound = bindArgs(diags, `'${op.name}'`, slots, call.args, call.span);
  if (!bound) return undefined;
  const attrs: Record<string, AttrValue> = {};
  let ok = true;
  for (const s of op.attrs) {
    const e = bound.get(s.name);
    if (!e) {
      if (s.default !== undefined) attrs[s.name] = s.default;
      continue;
    }
    const v = evalAttr({ diags }, s, e, env, op.name);
    if (v === undefined) ok = false;
    else attrs[s.name] = v;
  }
  return ok ? { attrs, operands: inputs.map((n) => bound.get(n)!) } : undefined;
}
