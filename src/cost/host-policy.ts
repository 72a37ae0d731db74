// How a run uses the host, as the runtime decides it and the pricing must assume it: one rule each, so that
// a prediction prices the run that happens.

/** How many host threads run `devicesHere` CPU devices of one process: 0 (a thread per stream) where a compute
 *  and a communication thread per device, over every process of the run on the machine's `cores`, would not
 *  outnumber them; else the process's share of the cores (at least 1), the threads taking turns on the
 *  devices. More threads would only take turns on the cores, paying a hand-off at every event between a
 *  device's streams and at every meeting of a group. */
export function hostThreadsOn(cores: number, devicesHere: number, processes = 1): number {
  if (2 * devicesHere * processes <= cores) return 0;
  return Math.max(1, Math.floor(cores / processes));
}

/** Steps longer than this stay overlapped (src/runtime/step-mode.ts), untried as blocking: two thread
 *  wake-ups are nothing to them, and a blocked run loop hears a signal only between steps. */
export const BLOCKING_STEP_LIMIT_SECONDS = 2e-3;
