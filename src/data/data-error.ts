// The error of every file-backed data source: a file, its contents or a request that cannot feed the model,
// reported before training starts wherever it can be.
export class DataError extends Error {}
