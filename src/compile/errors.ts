// Why a model cannot be compiled into a plan as asked: a setting still `auto`, settings that contradict the
// model or the cluster, a plan that does not fit in device memory. The CLI prints the message, exit 1.

export class CompileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CompileError";
  }
}

/** The message for a setting only the planner's search (the next issue) will choose. */
export function autoNotImplemented(setting: string, example: string, values?: string): CompileError {
  const choices = values === undefined ? "" : ` (one of ${values})`;
  return new CompileError(
    `parallel.${setting} is auto: choosing it automatically is not implemented yet (the planner's search comes ` +
      `next); give it in the parallel section or on the command line, e.g. --set parallel.${setting}=${example}${choices}`,
  );
}
