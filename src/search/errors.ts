// Why the plan search (or the optimal split of explicit settings) found nothing: compile reports it as a
// CompileError, so the search needs nothing from compile.

export class SearchError extends Error {}
