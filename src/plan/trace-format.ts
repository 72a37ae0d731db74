// Constants of the Chrome trace format `fsm run --trace` writes and `fsm viz --trace` reads: here, below both
// the runtime and viz, so the reader does not depend on the writer.

/** The process of the step's tail in traces of earlier fsm versions (their single-program engine); no device. */
export const TAIL_PID = 1_000_000;
