// Step 8 of compile: the predicted step from the finished programs: step time, bubble, exposed communication.
import { runPrograms, type EngineRun } from "./engine.js";
import type { Program, Rendezvous } from "./program.js";
import { hostedStepSeconds, NO_HOST, type HostStep } from "../cost/calibrated-pricing.js";

export interface StepPrediction {
  readonly run: EngineRun;
  readonly stepTime: number;
  /** Idle compute time over all programs ÷ (programs × step time); replicas idle alike. */
  readonly bubbleFraction: number;
  /** stepTime minus the step time with every comm action free. */
  readonly exposedComm: number;
}

/** Runs the programs; a run that does not finish is a compiler bug (every wait points back in time). */
export function runOrThrow(programs: readonly Program[], rendezvous: readonly Rendezvous[], what: string, freeComm = false): EngineRun {
  const run = runPrograms(programs, rendezvous, { freeComm });
  if (!run.complete) throw new Error(`internal: the ${what} deadlocks; stuck at:\n  ${run.stuck.join("\n  ")}`);
  return run;
}

/** `host`: the step's host costs around the programs (a calibration's; none without one, HostStep). */
export function predictStep(programs: readonly Program[], rendezvous: readonly Rendezvous[], host: HostStep = NO_HOST): StepPrediction {
  const run = runOrThrow(programs, rendezvous, "plan");
  const free = runOrThrow(programs, rendezvous, "plan with free communication", true);
  const makespan = run.makespan;
  const idle = run.programs.reduce((n, r) => n + Math.max(0, makespan - r.computeBusy), 0);
  return {
    run,
    stepTime: hostedStepSeconds(host, makespan),
    bubbleFraction: makespan > 0 ? idle / (programs.length * makespan) : 0,
    exposedComm: Math.max(0, makespan - free.makespan),
  };
}
