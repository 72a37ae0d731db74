// fp16 dynamic loss scaling, as torch.cuda.amp.GradScaler does it: the loss gradient starts at S so small
// gradients survive in f16; a step whose gradients overflow is skipped and S halves; after `interval`
// clean steps in a row S doubles. A fixed scale never changes (overflowing steps are still skipped).
export const INITIAL_LOSS_SCALE = 2 ** 16;
export const GROWTH_INTERVAL = 2000;

export class LossScaler {
  private clean = 0;

  constructor(
    private s: number,
    private readonly dynamic: boolean,
    private readonly interval = GROWTH_INTERVAL,
  ) {
    if (!(s > 0 && Number.isFinite(s))) throw new Error(`a loss scale must be a positive number, got ${s}`);
  }

  static of(setting: "dynamic" | number | undefined): LossScaler {
    return setting === undefined || setting === "dynamic" ? new LossScaler(INITIAL_LOSS_SCALE, true) : new LossScaler(setting, false);
  }

  get scale(): number {
    return this.s;
  }

  /** What a checkpoint keeps: the scale and the clean steps counted towards the next growth. */
  get state(): { scale: number; clean: number } {
    return { scale: this.s, clean: this.clean };
  }

  restore(state: { scale: number; clean: number }): void {
    this.s = state.scale;
    this.clean = state.clean;
  }

  /** After a step: whether its gradients overflowed (the step was skipped). */
  update(overflowed: boolean): void {
    if (!this.dynamic) return;
    if (overflowed) {
      this.s /= 2;
      this.clean = 0;
    } else if (++this.clean === this.interval) {
      this.s *= 2;
      this.clean = 0;
    }
  }
}
