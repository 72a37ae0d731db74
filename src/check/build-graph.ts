// Runs the model's forward code symbolically over the instance tree and records every op into the graph IR:
// tensors get checked types through each op's shape rule, parameters are created on first use with their
// hierarchical names, and each call of a top-level model member opens a new layer (a pipeline cut point).
import { error, hasErrors, warning, type Diagnostic } from "../diagnostics/diagnostic.js";
import type { Span } from "../diagnostics/span.js";
import { SYMBOLIC_DIMS } from "../graph/dim.js";
import { batchLayoutProblem } from "../graph/batch-coupling.js";
import { gradientNeeded } from "../graph/gradient-needed.js";
import { Graph, type OpId, type TensorId } from "../graph/graph.js";
import { isOpCheckError, type OpDef } from "../graph/op-def.js";
import { getOp, languageOp, languageOps } from "../graph/registry.js";
import { DTYPES, isFloatDType, type Attrs, type DType, type TensorType } from "../graph/types.js";
import type { BinaryOp, CallExpr, ForwardDecl, Stmt } from "../parse/ast.js";
import { asDim, evalExpr, type EvalContext } from "./const-eval.js";
import type { Declarations } from "./collect.js";
import { bindOpCall, type ElaboratedModel } from "./elaborate.js";
import { Scope, type Env } from "./env.js";
import { childPath, type Annotations, type BlockInstance, type Instance, type OpInstance } from "./instances.js";
import { didYouMean } from "./suggest.js";
import { describe, ERROR, type Value } from "./values.js";

/** Tensor arithmetic operators → registry ops. */
const BINARY_OPS: Partial<Record<BinaryOp, string>> = { "+": "add", "-": "sub", "*": "mul", "/": "div" };

export class GraphBuilder {
  readonly graph: Graph;
  private layer: number | undefined;
  /** True while executing statements of the model's own forward (not inside a member). */
  private atModelLevel = false;
  /** Path of the block instance whose forward is running (scope of inline ops). */
  private scopePath = "";
  /** Members forward called (instances, one per path: a set of objects, not of their long dotted paths, which
   *  a deep model's hundreds of thousands of calls would each have to hash). */
  private readonly used = new Set<Instance>();
  /** Each op instance's parameters once made, so a member called again reuses them without looking its
   *  parameter names up. */
  private readonly paramsOf = new Map<OpInstance, TensorId[]>();
  /** Where each layer's member was declared, for diagnostics about its annotations (stage pins). */
  readonly layerSpans = new Map<number, Span>();
  /** The source call of each op, for checks on the finished graph (position tables, batch coupling). */
  readonly opSpans = new Map<OpId, Span>();
  private readonly cx: EvalContext;
  /** The model's members that are elements of a repeat stack (parallel.layer_checkpoint = all checkpoints
   *  them), however the forward calls them: the stack at once, or element by element in a loop. */
  private readonly stackItems = new Set<Instance>();

  constructor(
    private readonly diags: Diagnostic[],
    private readonly decls: Declarations,
    private readonly model: ElaboratedModel,
    modelName: string,
    private readonly options: { readonly checkpointStacks?: boolean } = {},
  ) {
    this.graph = new Graph(modelName);
    const visit = (i: Instance): void => {
      if (i.kind === "repeat") {
        for (const item of i.items) {
          this.stackItems.add(item);
          visit(item);
        }
      } else if (i.kind === "block") {
        for (const m of i.members.values()) visit(m);
      }
    };
    visit(model.root);
    this.cx = {
      diags,
      call: (e, env) => this.call(e, env),
      tensorBinary: (op, a, b, span) => this.tensorBinary(op, a, b, span),
      extraNames: () => languageOps().filter((o) => o.kind === "function").map((o) => o.name),
    };
  }

  /** Executes the model forward; returns false when it could not produce a loss. */
  build(): boolean {
    const fwd = this.model.forward;
    if (!fwd) return false;
    const root = this.model.root;
    const scope = new Scope(root.env);
    let ok = true;
    for (const input of fwd.inputs) {
      const type = this.inputType(input);
      if (!type) {
        ok = false;
        scope.define(input.name.name, ERROR);
        continue;
      }
      scope.define(input.name.name, { k: "tensor", t: this.graph.addInput(input.name.name, type), type });
    }
    this.atModelLevel = true;
    const result = this.exec(fwd.body, scope);
    this.atModelLevel = false;
    // After any error (a bad input, a member that failed to elaborate, one in forward), values that depend on
    // it propagate silently and the calls that take them are skipped: "never called" would be noise.
    if (!hasErrors(this.diags)) this.warnUnused(root);
    if (!ok) return false;
    if (result === undefined) {
      this.diags.push(error("FSM407", "the model's forward must end with `return <loss>`", fwd.span));
      return false;
    }
    if (result.value.k === "error") return false;
    if (result.value.k !== "tensor" || result.value.type.shape.length !== 0 || result.value.type.dtype !== "f32") {
      this.diags.push(
        error("FSM406", `the model must return a scalar f32 loss (e.g. cross_entropy(logits, targets)), got ${describe(result.value)}`, result.span),
      );
      return false;
    }
    this.graph.setLoss(result.value.t);
    // One walk answers both: whether any parameter reaches the loss, and which parameters do not.
    const need = gradientNeeded(this.graph, this.graph.ops(), result.value.t);
    if (need[result.value.t] !== 1) {
      this.diags.push(error("FSM410", "the loss depends on no parameter: there is nothing to train", result.span));
      return false;
    }
    return this.checkParamsReachLoss(need);
  }

  /** A member called in forward whose result the loss never reads would have parameters with no gradient:
   *  refused, as PyTorch's DDP refuses unused parameters by default (FSDP's reduce-scatters and the
   *  pipelines' gradient transfers would wait for gradients that never come). */
  private checkParamsReachLoss(need: Uint8Array): boolean {
    const dead = new Map<number, string[]>();
    for (const p of this.graph.params()) {
      if (!isFloatDType(p.type.dtype) || need[p.tensor]) continue;
      dead.set(p.layer, [...(dead.get(p.layer) ?? []), p.name]);
    }
    for (const [layer, names] of dead) {
      const shown = names.length > 3 ? `${names.slice(0, 3).join(", ")}, …` : names.join(", ");
      this.diags.push(
        error("FSM411", `member '${this.graph.layers()[layer]!.name}' is called but the loss never reads what it returns: its parameters (${shown}) would get no gradient; use its result or remove the call`, this.layerSpans.get(layer)!),
      );
    }
    return dead.size === 0;
  }

  private inputType(input: ForwardDecl["inputs"][number]): TensorType | undefined {
    const t = input.type;
    if (!t) {
      this.diags.push(error("FSM401", `model input '${input.name.name}' needs a type, e.g. ${input.name.name}: f32[B, 128]`, input.name.span));
      return undefined;
    }
    const dtype = t.dtype.name;
    if (!(DTYPES as readonly string[]).includes(dtype)) {
      this.diags.push(error("FSM403", `unknown dtype '${dtype}' (use ${DTYPES.join(", ")})`, t.dtype.span, didYouMean(dtype, DTYPES)));
      return undefined;
    }
    const shape = [];
    for (const d of t.dims) {
      const v = evalExpr({ diags: this.diags }, d, this.model.root.env);
      if (v.k === "error") return undefined;
      const dd = asDim(v);
      if (!dd) {
        this.diags.push(error("FSM404", `a dimension must be a positive int, ${SYMBOLIC_DIMS.join(" or ")}, got ${describe(v)}`, d.span));
        return undefined;
      }
      shape.push(dd);
    }
    const type = { dtype: dtype as DType, shape };
    const bad = batchLayoutProblem(input.name.name, type);
    if (bad) {
      this.diags.push(error("FSM404", bad.message, t.dims[bad.dim]?.span ?? t.span));
      return undefined;
    }
    return type;
  }

  /** Runs statements; returns the returned value (with its span) or undefined when no return was reached. */
  private exec(body: readonly Stmt[], scope: Scope): { value: Value; span: Span } | undefined {
    for (const s of body) {
      switch (s.kind) {
        case "Assign": {
          const existing = scope.lookup(s.target.name);
          if (existing?.k === "instance") {
            this.diags.push(error("FSM301", `'${s.target.name}' is a member; pick another name for this tensor`, s.target.span));
            continue;
          }
          scope.define(s.target.name, evalExpr(this.cx, s.value, scope));
          break;
        }
        case "Return":
          return { value: evalExpr(this.cx, s.value, scope), span: s.value.span };
        case "For": {
          const it = evalExpr(this.cx, s.iterable, scope);
          if (it.k === "error") continue;
          const items: Value[] | undefined =
            it.k === "instance" && it.inst.kind === "repeat"
              ? it.inst.items.map((inst) => ({ k: "instance", inst }))
              : it.k === "list" || it.k === "tuple"
                ? [...it.items]
                : undefined;
          if (!items) {
            this.diags.push(error("FSM405", `'for' needs a repeat member or a list, got ${describe(it)}`, s.iterable.span));
            continue;
          }
          for (const item of items) {
            // The loop variable is bound in the enclosing scope, as in Python, so the body's assignments persist.
            scope.define(s.variable.name, item);
            const r = this.exec(s.body, scope);
            if (r) return r;
          }
          break;
        }
      }
    }
    return undefined;
  }

  private call(e: CallExpr, env: Env): Value {
    if (e.callee.kind === "Name") {
      const name = e.callee.name;
      const v = env.lookup(name);
      if (v === undefined) {
        const op = languageOp(name);
        if (op?.kind === "function") return this.callFunctionOp(op, e, env);
        if (op || this.decls.blocks.has(name)) {
          this.diags.push(
            error("FSM405", `'${name}' has parameters: declare it as a member (e.g. fc = ${name}(...)) and call the member`, e.callee.span),
          );
          return ERROR;
        }
        const fnOps = languageOps().filter((o) => o.kind === "function").map((o) => o.name);
        this.diags.push(error("FSM300", `unknown name '${name}'`, e.callee.span, didYouMean(name, [...env.names(), ...fnOps])));
        return ERROR;
      }
      return this.callValue(v, e, env);
    }
    return this.callValue(evalExpr(this.cx, e.callee, env), e, env);
  }

  private callValue(callee: Value, e: CallExpr, env: Env): Value {
    if (callee.k === "error") return callee;
    if (callee.k !== "instance") {
      this.diags.push(error("FSM405", `${describe(callee)} is not callable`, e.callee.span));
      return ERROR;
    }
    const named = e.args.find((a) => a.name);
    if (named) {
      this.diags.push(error("FSM303", `members take tensors as positional arguments; '${named.name!.name}:' is not allowed here`, named.span));
      return ERROR;
    }
    const args = e.args.map((a) => evalExpr(this.cx, a.value, env));
    if (args.some((a) => a.k === "error")) return ERROR;
    for (let i = 0; i < args.length; i++) {
      if (args[i]!.k !== "tensor") {
        this.diags.push(error("FSM405", `argument ${i + 1} of '${callee.inst.path}' must be a tensor, got ${describe(args[i]!)}`, e.args[i]!.span));
        return ERROR;
      }
    }
    return this.callInstance(callee.inst, args as TensorValue[], e);
  }

  private callInstance(inst: Instance, args: TensorValue[], e: CallExpr): Value {
    if (inst.kind === "repeat") {
      // Calling a stack runs its elements in order, each output feeding the next.
      if (args.length !== 1) {
        this.diags.push(error("FSM305", `the stack '${inst.path}' takes exactly one tensor`, e.span));
        return ERROR;
      }
      let x: Value = args[0]!;
      for (const item of inst.items) {
        if (x.k !== "tensor") return x;
        x = this.callInstance(item, [x], e);
      }
      return x;
    }
    if (!this.atModelLevel) {
      if (hasLayerAnnotations(inst.annotations)) {
        // Stages, checkpointing and FSDP units are decided per layer; a nested member cannot carry them yet.
        this.diags.push(
          error("FSM313", `'${inst.path}' is inside a layer: @stage, @checkpoint and @fsdp_unit apply to members of the model (or their blocks)`, inst.span),
        );
        return ERROR;
      }
      return this.callInner(inst, args, e);
    }
    // A call made by the model's own forward is a layer: the unit that pipeline stages are cut from.
    const annotations = layerAnnotations(inst.annotations);
    this.layer = this.graph.addLayer(inst.path, this.options.checkpointStacks && this.stackItems.has(inst) ? { ...annotations, checkpoint: true } : annotations);
    this.layerSpans.set(this.layer, inst.annotations.stageSpan ?? inst.span);
    this.atModelLevel = false;
    try {
      return this.callInner(inst, args, e);
    } finally {
      this.atModelLevel = true;
    }
  }

  private callInner(inst: OpInstance | BlockInstance, args: TensorValue[], e: CallExpr): Value {
    this.markUsed(inst);
    return inst.kind === "op" ? this.callOpInstance(inst, args, e) : this.callBlock(inst, args, e);
  }

  private callBlock(inst: BlockInstance, args: TensorValue[], e: CallExpr): Value {
    const fwd = inst.decl.body.find((b): b is ForwardDecl => b.kind === "Forward")!;
    if (fwd.inputs.length !== args.length) {
      this.diags.push(error("FSM305", `'${inst.path}' (${inst.decl.name.name}) takes ${fwd.inputs.length} tensor${fwd.inputs.length === 1 ? "" : "s"}, got ${args.length}`, e.span));
      return ERROR;
    }
    const scope = new Scope(inst.env);
    fwd.inputs.forEach((input, i) => scope.define(input.name.name, args[i]!));
    const saved = this.scopePath;
    this.scopePath = inst.path;
    try {
      const r = this.exec(fwd.body, scope);
      if (!r) {
        this.diags.push(error("FSM407", `block '${inst.decl.name.name}' does not return a value`, fwd.span));
        return ERROR;
      }
      return r.value;
    } finally {
      this.scopePath = saved;
    }
  }

  private callOpInstance(inst: OpInstance, args: TensorValue[], e: CallExpr): Value {
    const def = inst.def;
    if (args.length !== def.inputs.length) {
      this.diags.push(error("FSM305", `'${inst.path}' (${def.name}) takes ${def.inputs.length} tensor${def.inputs.length === 1 ? "" : "s"}, got ${args.length}`, e.span));
      return ERROR;
    }
    const params = this.ensureParams(inst);
    return this.addOp(def, inst.attrs, args, params, inst.path, e.span);
  }

  private callFunctionOp(op: OpDef, e: CallExpr, env: Env): Value {
    const bound = bindOpCall(this.diags, op, op.inputs, e, env);
    if (!bound) return ERROR;
    const operands = bound.operands.map((x) => evalExpr(this.cx, x, env));
    if (operands.some((o) => o.k === "error")) return ERROR;
    for (let i = 0; i < operands.length; i++) {
      if (operands[i]!.k !== "tensor") {
        this.diags.push(error("FSM405", `'${op.inputs[i]}' of ${op.name} must be a tensor, got ${describe(operands[i]!)}`, bound.operands[i]!.span));
        return ERROR;
      }
    }
    return this.addOp(op, bound.attrs, operands as TensorValue[], [], this.scopePath, e.span);
  }

  private addOp(def: OpDef, attrs: Attrs, args: TensorValue[], params: readonly TensorId[], scope: string, span: Span): Value {
    const out = def.infer(args.map((a) => a.type), attrs);
    if (isOpCheckError(out)) {
      this.diags.push(error(out.code, out.message, span));
      return ERROR;
    }
    const layer = this.currentLayer();
    const [t] = this.graph.addOp({ op: def.name, attrs, inputs: [...args.map((a) => a.t), ...params], outputTypes: [out], scope, layer });
    this.opSpans.set(this.graph.tensor(t!).producer!, span);
    return { k: "tensor", t: t!, type: out };
  }

  /** Inline ops before the first member call still need a layer. */
  private currentLayer(): number {
    this.layer ??= this.graph.addLayer("input");
    return this.layer;
  }

  private tensorBinary(op: BinaryOp | "neg", a: Value, b: Value | undefined, span: Span): Value {
    const num = (v: Value | undefined): v is { k: "int" | "float"; v: number } => v?.k === "int" || v?.k === "float";
    const scale = getOp("scale")!;
    if (op === "neg" && a.k === "tensor") return this.addOp(scale, { factor: -1 }, [a], [], this.scopePath, span);
    if (a.k === "tensor" && b?.k === "tensor") {
      const name = BINARY_OPS[op as BinaryOp];
      if (name) return this.addOp(getOp(name)!, {}, [a, b], [], this.scopePath, span);
    } else if (op === "*" && a.k === "tensor" && num(b)) return this.addOp(scale, { factor: b.v }, [a], [], this.scopePath, span);
    else if (op === "*" && num(a) && b?.k === "tensor") return this.addOp(scale, { factor: a.v }, [b], [], this.scopePath, span);
    else if (op === "/" && a.k === "tensor" && num(b)) {
      if (b.v === 0) {
        this.diags.push(error("FSM400", "division by zero", span));
        return ERROR;
      }
      if (!Number.isFinite(1 / b.v)) {
        this.diags.push(error("FSM400", `dividing by ${b.v} overflows to Infinity: a value must be a finite number`, span));
        return ERROR;
      }
      return this.addOp(scale, { factor: 1 / b.v }, [a], [], this.scopePath, span);
    }
    this.diags.push(error("FSM401", `'${op}' is not defined for ${describe(a)} and ${b ? describe(b) : "nothing"}`, span));
    return ERROR;
  }

  /** Creates an op instance's parameters on first use (in the current layer); returns them in spec order. Its
   *  parameters' names are its own path's, so none exists before its first use (addParam would refuse one). */
  private ensureParams(inst: OpInstance): readonly TensorId[] {
    const made = this.paramsOf.get(inst);
    if (made) return made;
    const ids: TensorId[] = [];
    for (const spec of inst.specs) {
      if (inst.tie?.local === spec.name) {
        ids.push(this.tiedParam(inst, inst.tie.target));
        continue;
      }
      const name = childPath(inst.path, spec.name);
      ids.push(this.graph.addParam({ name, type: { dtype: "f32", shape: spec.shape }, init: spec.init, layer: this.currentLayer(), scope: inst.path }));
    }
    this.paramsOf.set(inst, ids);
    return ids;
  }

  private tiedParam(inst: OpInstance, target: string): TensorId {
    const alias = childPath(inst.path, inst.tie!.local);
    let p = this.graph.param(target);
    if (!p) {
      // The owner of the tied weight has not run yet: create its parameters now, in this layer.
      const owner = this.model.opInstances.get(target.slice(0, target.lastIndexOf(".")));
      if (owner) this.ensureParams(owner);
      p = this.graph.param(target);
    }
    if (!p) throw new Error(`internal: tied parameter '${target}' has no owner`);
    if (!this.graph.param(alias)) this.graph.aliasParam(alias, target);
    return p.tensor;
  }

  private markUsed(inst: OpInstance | BlockInstance): void {
    this.used.add(inst);
  }

  /** A member that forward never calls has no place in the graph; say so rather than drop it silently. */
  private warnUnused(root: BlockInstance): void {
    const visit = (inst: Instance): void => {
      if (inst.kind === "repeat") {
        if (inst.items.every((i) => !this.isUsed(i))) this.unused(inst);
        else inst.items.forEach(visit);
        return;
      }
      if (!this.isUsed(inst)) return this.unused(inst);
      if (inst.kind === "block") inst.members.forEach(visit);
    };
    root.members.forEach(visit);
  }

  private isUsed(inst: Instance): boolean {
    return inst.kind === "repeat" ? inst.items.some((i) => this.isUsed(i)) : this.used.has(inst);
  }

  private unused(inst: Instance): void {
    this.diags.push(warning("FSM390", `member '${inst.path}' is never called in forward; its parameters are not part of the model`, inst.span));
  }
}

type TensorValue = Extract<Value, { k: "tensor" }>;

function hasLayerAnnotations(a: Annotations): boolean {
  return a.stage !== undefined || a.checkpoint === true || a.fsdpUnit === true;
}

function layerAnnotations(a: Annotations) {
  return {
    ...(a.stage !== undefined ? { stage: a.stage } : {}),
    ...(a.checkpoint ? { checkpoint: true } : {}),
    ...(a.fsdpUnit ? { fsdpUnit: true } : {}),
  };
}
