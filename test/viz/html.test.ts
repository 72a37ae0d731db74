// The HTML page and the standalone SVG: deterministic bytes, an element per stage and per program row, every
// SVG well-formed XML, nothing fetched from the network.
import { describe, expect, it } from "vitest";
import { renderHtml } from "../../src/viz/html.js";
import { renderSvg } from "../../src/viz/svg.js";
import { buildViewModel } from "../../src/viz/view-model.js";
import { CASES, externalReferences, planFor, svgsOf, xmlProblems } from "./helpers.js";

describe("viz HTML", () => {
  for (const c of CASES) {
    it(`${c.id}: deterministic, an element per stage and program row, well-formed SVG, self-contained`, () => {
      const plan = planFor(c);
      const html = renderHtml(buildViewModel(plan));
      expect(renderHtml(buildViewModel(plan))).toBe(html);
      expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
      for (const st of plan.stages) {
        expect(html).toContain(`<tr data-stage="${st.index}">`);
        expect(html).toContain(`<g class="stage-cluster" data-stage="${st.index}">`);
      }
      for (const p of plan.programs) {
        expect(html.match(new RegExp(`<g class="row predicted" data-program="${p.id}">`, "g"))).toHaveLength(1);
        expect(html).toContain(`data-memory-program="${p.id}"`);
      }
      const svgs = svgsOf(html);
      expect(svgs).toHaveLength(3); // graph, predicted timeline, memory
      for (const svg of svgs) expect(xmlProblems(svg)).toEqual([]);
      expect(externalReferences(html)).toEqual([]);
      // No time of day or random ids: the only numbers that could differ run to run would be those.
      expect(html).not.toMatch(/\b20\d\d-\d\d-\d\d|Math\.random|Date\(/);
    });
  }

  it("the standalone SVG is one well-formed document with the graph, timeline and memory chart", () => {
    const svg = renderSvg(buildViewModel(planFor(CASES[1]!)));
    expect(svg.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(xmlProblems(svg)).toEqual([]);
    expect(svg).toContain('class="viz graph"');
    expect(svg).toContain('class="viz timeline"');
    expect(svg).toContain('class="viz memory-chart"');
    expect(externalReferences(svg)).toEqual([]);
  });

  it("the XML check finds what it is for", () => {
    expect(xmlProblems('<svg><g><rect x="1"/></g></svg>')).toEqual([]);
    expect(xmlProblems("<svg><g></svg>")).not.toEqual([]);
    expect(xmlProblems('<svg><text x="1">a & b</text></svg>')).not.toEqual([]);
    expect(xmlProblems("<svg><rect x=1/></svg>")).not.toEqual([]);
    expect(xmlProblems('<svg a="1"></svg><svg></svg>')).not.toEqual([]);
    expect(externalReferences('<script src="x.js"></script><a href="https://x">')).toHaveLength(2);
  });
});
