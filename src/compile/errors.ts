// Why a model cannot be compiled into a plan as asked: settings that contradict the model or the cluster, a
// search that finds nothing that fits, a plan that does not fit in device memory. The CLI prints the message, exit 1.

export class CompileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CompileError";
  }
}
