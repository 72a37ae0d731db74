// Where the CLI writes: injected so tests run commands in-process and capture output.

export interface CliIO {
  stdout(text: string): void;
  stderr(text: string): void;
}
