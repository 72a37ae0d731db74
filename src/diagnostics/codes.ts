// The stable diagnostic codes: one table, so docs, tests and the CLI agree on what each code means.

export const DIAGNOSTIC_CODES = {
  // Lexing and parsing (1xx)
  FSM100: "unexpected character",
  FSM101: "unterminated string literal",
  FSM102: "unterminated block comment",
  FSM110: "unexpected token",
  FSM111: "no valid alternative here",
  FSM112: "expected at least one item",
  FSM113: "unexpected input after the end",
  FSM120: "invalid number literal",
  // Imports (2xx)
  FSM200: "cannot read imported file",
  FSM201: "import cycle",
  FSM202: "name defined in more than one file",
  // Names and structure (3xx)
  FSM300: "unknown name",
  FSM301: "duplicate name",
  FSM302: "unknown op or block",
  FSM303: "unknown argument",
  FSM304: "missing required argument",
  FSM305: "wrong number of arguments",
  FSM306: "argument given twice",
  FSM307: "recursive block",
  FSM308: "missing or duplicate model",
  FSM309: "unknown member",
  FSM310: "unknown setting",
  FSM311: "duplicate setting",
  FSM312: "missing forward",
  FSM313: "unknown annotation",
  FSM390: "unused member",
  // Values, types and shapes (4xx)
  FSM400: "constant evaluation error",
  FSM401: "type mismatch",
  FSM402: "shape mismatch",
  FSM403: "dtype mismatch",
  FSM404: "invalid rank or dimension",
  FSM405: "wrong kind of value",
  FSM406: "model must return a scalar loss",
  FSM407: "missing return",
  FSM408: "invalid tied parameter",
  FSM409: "value out of range",
  FSM410: "loss depends on no parameter",
  FSM411: "parameters the loss does not reach",
  // Train and parallel settings (5xx)
  FSM500: "invalid setting value",
  FSM501: "balance does not match the layers",
  FSM502: "invalid device count",
  FSM503: "inconsistent parallel settings",
  FSM504: "batch does not divide evenly",
  FSM505: "stage pin out of range",
  FSM506: "op mixes the samples of a split batch",
  FSM507: "model does not split over tensor_parallel",
  FSM510: "invalid --set override",
} as const;

export type DiagnosticCode = keyof typeof DIAGNOSTIC_CODES;
