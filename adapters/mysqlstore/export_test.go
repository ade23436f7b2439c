package mysqlstore

// Internals the external tests exercise directly.
var (
	SplitStatements = splitStatements
	Retryable       = retryable
	WrapErr         = wrapErr
)
