// Shared by the viz tests: the plans they draw (compiled in-process, cached per file) and a small strict XML
// checker for the SVG they emit (tags balanced, attributes quoted, only the five XML entities or numeric ones).
import type { Plan } from "../../src/plan/plan.js";
import { compileSample, type SampleName } from "../compile/helpers.js";

export interface PlanCase {
  readonly id: string;
  readonly sample: SampleName;
  readonly cluster: string;
  readonly devices: number;
  readonly overrides: Readonly<Record<string, string | number | boolean>>;
}

/** The golden plans: small CPU plans with pipeline, replicas and sharding, and a GPU-sized one. */
export const CASES: readonly PlanCase[] = [
  { id: "mlp", sample: "mlp", cluster: "cpu", devices: 4, overrides: { stages: 2, data_parallel: 2, chunks: 2 } },
  { id: "gpt-tiny", sample: "gpt-tiny", cluster: "cpu", devices: 4, overrides: { stages: 2, data_parallel: 2, shard: "fsdp", no_sync: false, chunks: 2 } },
  { id: "gpt2-124m", sample: "gpt2-124m", cluster: "h100-sxm", devices: 16, overrides: { stages: 2, shard: "oss", chunks: 8 } },
];

const cache = new Map<string, Plan>();

export function planFor(c: PlanCase): Plan {
  let plan = cache.get(c.id);
  if (!plan) {
    plan = compileSample(c.sample, c.cluster, c.overrides, c.devices).plan;
    cache.set(c.id, plan);
  }
  return plan;
}

export const caseById = (id: string): PlanCase => CASES.find((c) => c.id === id)!;

const NAME = /^[A-Za-z_][\w:.-]*$/;
const ENTITY = /&(?!(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)/;

/** Problems that keep `xml` (one element with its content) from being well-formed XML; empty when none. */
export function xmlProblems(xml: string): string[] {
  const problems: string[] = [];
  const stack: string[] = [];
  let roots = 0;
  let i = 0;
  while (i < xml.length && problems.length < 10) {
    const lt = xml.indexOf("<", i);
    const text = xml.slice(i, lt < 0 ? xml.length : lt);
    if (ENTITY.test(text)) problems.push(`a bare '&' in text near ${JSON.stringify(text.slice(0, 40))}`);
    if (stack.length === 0 && text.trim() !== "") problems.push(`text outside the root element: ${JSON.stringify(text.slice(0, 40))}`);
    if (lt < 0) break;
    if (xml.startsWith("<?", lt)) {
      i = xml.indexOf("?>", lt) + 2;
      continue;
    }
    const gt = xml.indexOf(">", lt);
    if (gt < 0) {
      problems.push(`an unterminated tag at ${lt}`);
      break;
    }
    const tag = xml.slice(lt + 1, gt);
    i = gt + 1;
    if (tag.startsWith("/")) {
      const name = tag.slice(1).trim();
      const open = stack.pop();
      if (open !== name) problems.push(`</${name}> closes <${open ?? "nothing"}>`);
      continue;
    }
    const selfClosing = tag.endsWith("/");
    const body = selfClosing ? tag.slice(0, -1) : tag;
    const m = /^(\S+)([\s\S]*)$/.exec(body);
    if (!m || !NAME.test(m[1]!)) {
      problems.push(`a bad tag <${tag.slice(0, 40)}>`);
      continue;
    }
    const rest = m[2]!.replace(/\s+([A-Za-z_][\w:.-]*)="([^"<]*)"/g, (_all, _n, v: string) => {
      if (ENTITY.test(v)) problems.push(`a bare '&' in an attribute of <${m[1]}>`);
      return "";
    });
    if (rest.trim() !== "") problems.push(`unparsed attributes in <${m[1]}>: ${JSON.stringify(rest.trim().slice(0, 40))}`);
    if (stack.length === 0) roots++;
    if (!selfClosing) stack.push(m[1]!);
  }
  if (stack.length > 0) problems.push(`unclosed: ${stack.slice(-3).join(" > ")}`);
  if (roots !== 1) problems.push(`${roots} root elements`);
  return problems;
}

/** The top-level <svg>...</svg> elements of an HTML page (they do not nest there). */
export function svgsOf(html: string): string[] {
  return html.match(/<svg[\s\S]*?<\/svg>/g) ?? [];
}

/** Nothing a browser would fetch: no script/style/image sources, links or imports from elsewhere. */
export function externalReferences(text: string): string[] {
  return text.match(/<script[^>]*\ssrc=|<link\b|\s(?:href|src)="(?:https?:)?\/\/|@import|url\(\s*["']?(?:https?:)?\/\//gi) ?? [];
}
