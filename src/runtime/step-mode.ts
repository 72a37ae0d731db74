// How the run loop takes a step: `overlapped` hands the devices' run to a worker thread and makes the next batch
// meanwhile (a data loader's prefetch); `blocking` runs the step on the loop's own thread and makes the batch
// after. Overlapping hides the batch's making behind the devices' work where they leave a core free, but pays
// two thread wake-ups a step, the worker's and then the loop thread's from its sleep (the call's return to the
// first instruction plus the last instruction's end to JavaScript going on: 30–49 µs a step for gpt-tiny on 1
// device, 25–27 for mlp); blocking pays neither, and the batch in full. Which wins depends on the batch, the
// model and the machine: measured in one process, blocking took 0.88–0.94× the overlapped step of gpt-tiny on 1,
// 2 and 4 devices and 0.75–0.83× of mlp on 2, but 1.21–1.26× of mlp on 1 device, whose ~45 µs of work hides
// behind its ~47 µs batch. So the loop measures both: after WARM_STEPS overlapped steps it alternates blocks of
// BLOCK_STEPS steps of each mode, TRIAL_BLOCKS in all, and keeps the one whose steps' median was lower. Steps
// longer than BLOCKING_STEP_LIMIT_SECONDS (src/cost/host-policy.ts, which the pricing assumes too) stay
// overlapped untried. Either way the devices run the same program: the mode moves no bit.

import { BLOCKING_STEP_LIMIT_SECONDS } from "../cost/host-policy.js";

export type StepMode = "overlapped" | "blocking";

// A fresh run's first dozens of steps run unoptimized JavaScript, slowest first: a trial that began at step
// 11 with blocks of 10 chose blocking for mlp's 1 device, where it measured 1.21× slower.
const WARM_STEPS = 100;
const BLOCK_STEPS = 20;
const TRIAL_BLOCKS = 8;

export class StepModeChooser {
  private recorded = 0;
  private readonly warm: number[] = [];
  private readonly trial: Record<StepMode, number[]> = { overlapped: [], blocking: [] };
  private chosen: StepMode | undefined;

  /** `tryBlocking`: whether the engine can block (otherwise every step is overlapped). */
  constructor(tryBlocking: boolean) {
    if (!tryBlocking) this.chosen = "overlapped";
  }

  /** The mode of the next step. */
  mode(): StepMode {
    if (this.chosen) return this.chosen;
    if (this.recorded < WARM_STEPS) return "overlapped";
    return Math.floor((this.recorded - WARM_STEPS) / BLOCK_STEPS) % 2 === 0 ? "overlapped" : "blocking";
  }

  /** The mode settled on, once the trial is over (or there was none). */
  settled(): StepMode | undefined {
    return this.chosen;
  }

  /** The step just taken (in mode()'s mode) took `seconds`. */
  record(seconds: number): void {
    if (this.chosen) return;
    const mode = this.mode();
    this.recorded++;
    if (this.recorded <= WARM_STEPS) {
      this.warm.push(seconds);
      if (this.recorded === WARM_STEPS && median(this.warm) > BLOCKING_STEP_LIMIT_SECONDS) this.chosen = "overlapped";
      return;
    }
    this.trial[mode].push(seconds);
    if (this.recorded === WARM_STEPS + TRIAL_BLOCKS * BLOCK_STEPS) this.chosen = median(this.trial.blocking) < median(this.trial.overlapped) ? "blocking" : "overlapped";
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}
