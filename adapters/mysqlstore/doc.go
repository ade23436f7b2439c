// Package mysqlstore implements domain.Ledger (products, card pool, orders, stock flow,
// outbox, payments, the payment notification log, operators, the audit log, the alert log and the
// transaction boundary) on MySQL/MariaDB with Bun, mysqldialect and go-sql-driver/mysql, and
// runs the schema migrations of package migrations with bun/migrate.
//
// Every repository is written against bun.IDB, so the same code runs on the database
// (each call its own autocommit statement) or inside Ledger.Atomically's transaction.
// Transactions run at READ COMMITTED: at REPEATABLE READ the gap and next-key locks of
// concurrent payments on one product deadlock almost every time, while READ COMMITTED takes
// only record locks. A transaction that still deadlocks (1213) or times out on a lock (1205)
// is rolled back and run again, up to five times.
//
// BatchingLedger is the same Ledger with group commit: concurrent transactions that only
// insert orders and append flow rows (placing an order) are written in shared transactions,
// one multi-row INSERT per table and one COMMIT per batch; a batch that fails is written
// again one member at a time, so that each gets its own outcome.
//
// Every status change is a conditional UPDATE that reports whether it won. Codes are taken
// with SELECT … FOR UPDATE SKIP LOCKED in the allocation index's order, so concurrent payments
// of one product take different codes instead of queueing behind each other; only when the
// unlocked codes are too few does a payment re-run and wait for the others' locks.
//
// Card codes are stored encrypted (AES-256-GCM under a rotatable Keyring, bound to their
// product) with an HMAC of the code for de-duplication; only reads of an order's codes and
// allocations decrypt them. Errors are mapped to the domain's: duplicate keys to
// ErrDuplicateOrder, ErrDuplicateIdempotencyKey, ErrProductExists, ErrDuplicateFlow and
// ErrPaymentExists, missing rows to the not-found errors, and a database that cannot be
// reached (or a transaction that kept deadlocking) to an error matching domain.ErrUnavailable
// that keeps its cause.
//
// It imports the domain and migrations packages, the standard library, Bun and the MySQL
// driver; nothing from application or the other adapters.
package mysqlstore
