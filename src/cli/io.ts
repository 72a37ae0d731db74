// Where the CLI writes: injected so tests run commands in-process and capture output.

export interface CliIO {
  stdout(text: string): void;
  stderr(text: string): void;
  /** stdout is a terminal: progress may redraw one line instead of printing one per update. */
  readonly isTTY?: boolean;
}
