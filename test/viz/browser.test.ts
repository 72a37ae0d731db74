// `fsm viz` pages in a real browser: headless Chromium (Debian's `chromium` package, installed by .ci/run)
// driven by playwright-core. Each page must load without console errors or page errors, have an element for
// every stage and every program row (and measured device rows when a trace is given), and render a
// screenshot that is not blank. Skipped, saying why, where Chromium is not installed.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileSample } from "../compile/helpers.js";
import { buildViewModel } from "../../src/viz/view-model.js";
import { renderHtml } from "../../src/viz/html.js";
import { measuredStep, parseTrace } from "../../src/viz/trace.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import type { Plan } from "../../src/plan/plan.js";
import { decodePng } from "../support/png.js";
import { CASES, planFor } from "./helpers.js";

const CHROMIUM = "/usr/bin/chromium";
const have = existsSync(CHROMIUM);
if (!have) console.warn(`test/viz/browser.test.ts skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

let browser: Browser;
let dir: string;

beforeAll(async () => {
  if (!have) return;
  dir = mkdtempSync(join(tmpdir(), "fsm-viz-browser-"));
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
}, 60_000);

afterAll(async () => {
  if (!have) return;
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open(name: string, html: string): Promise<{ errors: string[]; count: (selector: string) => Promise<number>; png: Buffer; close: () => Promise<void> }> {
  const file = join(dir, `${name}.html`);
  writeFileSync(file, html);
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  // Offline by construction: any request that is not the file itself is an error.
  page.on("request", (r) => {
    if (!r.url().startsWith("file://")) errors.push(`network request to ${r.url()}`);
  });
  await page.goto(`file://${file}`, { waitUntil: "load" });
  // Hover a timeline block: the page's script (outlining its micro-batch) runs on it without errors.
  const block = page.locator("[data-timeline=predicted] rect.b").first();
  if ((await block.count()) > 0) await block.hover();
  const png = await page.screenshot({ fullPage: false });
  return { errors, count: (selector) => page.locator(selector).count(), png, close: () => page.close() };
}

/** Not blank: many pixels differ from the page background and several colors appear. */
function assertNotBlank(png: Buffer): void {
  const img = decodePng(png);
  const px = (i: number): number => (img.rgba[4 * i]! << 16) | (img.rgba[4 * i + 1]! << 8) | img.rgba[4 * i + 2]!;
  const background = px(0);
  const colors = new Set<number>();
  let differ = 0;
  for (let i = 0; i < img.width * img.height; i++) {
    const c = px(i);
    if (c !== background) differ++;
    if (colors.size < 64) colors.add(c);
  }
  expect(differ / (img.width * img.height)).toBeGreaterThan(0.02);
  expect(colors.size).toBeGreaterThan(8);
}

async function check(name: string, plan: Plan, html: string, more?: (count: (selector: string) => Promise<number>) => Promise<void>): Promise<void> {
  const p = await open(name, html);
  try {
    expect(p.errors, p.errors.join("\n")).toEqual([]);
    for (let k = 0; k < plan.stages.length; k++) expect(await p.count(`tr[data-stage="${k}"]`), `stage ${k}`).toBeGreaterThan(0);
    for (const program of plan.programs) expect(await p.count(`[data-timeline=predicted] [data-program="${program.id}"]`), `program ${program.id}`).toBe(1);
    assertNotBlank(p.png);
    await more?.(p.count);
  } finally {
    await p.close();
  }
}

describe.skipIf(!have)("fsm viz in Chromium", () => {
  for (const c of CASES) {
    it(`${c.id}: loads without errors, every stage and program row present, not blank`, async () => {
      const plan = planFor(c);
      await check(c.id, plan, renderHtml(buildViewModel(plan)));
    }, 60_000);
  }

  it("gpt-tiny with a measured trace from fsm run: a measured row per device beside the predicted ones", async () => {
    const plan = compileSample("gpt-tiny", "cpu", { stages: 2, data_parallel: 2, shard: "fsdp", no_sync: false, chunks: 2 }, 4).plan;
    let events: unknown[] = [];
    await runPlan(plan, { steps: 2, engine: "native", trace: true, onDone: (e) => (events = e.trace?.() ?? []) });
    const measured = measuredStep(parseTrace(JSON.stringify({ traceEvents: events })), plan.cluster.devices);
    await check("gpt-tiny-trace", plan, renderHtml(buildViewModel(plan, { measured })), async (count) => {
      for (let d = 0; d < plan.cluster.devices; d++) expect(await count(`[data-timeline=measured] [data-device="${d}"]`), `device ${d}`).toBe(1);
    });
  }, 60_000);

  it("the checks catch what they guard against: a script error, a blank page", async () => {
    const broken = await open("broken", "<!doctype html><html><body><p>x</p><script>missingFunction()</script></body></html>");
    expect(broken.errors.join(" ")).toContain("missingFunction");
    await broken.close();
    const blank = await open("blank", "<!doctype html><html><body></body></html>");
    expect(() => assertNotBlank(blank.png)).toThrow();
    await blank.close();
  }, 60_000);

  it("gpt3-175b on 1,024 H100s stays usable: loads in the browser, one row per program", async () => {
    const plan = compileSample("gpt3-175b", "h100-sxm", {}, 1024).plan;
    const started = performance.now();
    await check("gpt3", plan, renderHtml(buildViewModel(plan)));
    console.log(`gpt3-175b × 1024: rendered and loaded in Chromium in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }, 120_000);
});
