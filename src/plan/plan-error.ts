// The one error a plan file can raise on load: what is wrong and where, as a JSON path into the document.

export class PlanError extends Error {
  /** e.g. `programs[3].actions[17].deps[0]`; empty for the document as a whole. */
  readonly path: string;
  readonly reason: string;

  constructor(path: string, reason: string) {
    super(path === "" ? reason : `${path}: ${reason}`);
    this.name = "PlanError";
    this.path = path;
    this.reason = reason;
  }
}
