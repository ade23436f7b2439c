package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
)

// Pool settings applied by Open.
const (
	maxOpenConns    = 64
	connMaxLifetime = 30 * time.Minute
	connMaxIdleTime = 5 * time.Minute
	dialTimeout     = 5 * time.Second
)

// sessionDefaults are the session variables Open sets on every connection unless the DSN
// sets them itself.
//
//   - time_zone: NOW() and UTC_TIMESTAMP() agree, and nothing is converted on the way.
//   - sql_mode: strict, so an over-long value is an error instead of being cut; and without
//     NO_BACKSLASH_ESCAPES, which Bun's client-side quoting of string arguments relies on.
//   - innodb_lock_wait_timeout: a payment blocked on a row lock gives up after 5 s (the
//     server's default is 50 s) and is retried, instead of holding an HTTP request.
var sessionDefaults = map[string]string{
	"time_zone":                "'+00:00'",
	"sql_mode":                 "'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
	"innodb_lock_wait_timeout": "5",
}

// Open connects to the database named by dsn (go-sql-driver/mysql syntax, for example
// "user:pass@tcp(127.0.0.1:3306)/cardshop") and returns a Bun handle. It forces the settings
// the ledger relies on — parseTime=true, loc=UTC, rows affected counted as changed rows (not
// found rows), times written in UTC — sets the session defaults above when the DSN does not,
// and sizes the pool for a busy service (64 connections, recycled every 30 minutes).
//
// Open does not fail when the server is down: every later call then returns an error matching
// domain.ErrUnavailable. Ping the returned handle to check the server at start-up.
func Open(dsn string) (*bun.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: parse DSN: %w", err)
	}
	sqldb, err := openConfig(cfg)
	if err != nil {
		return nil, err
	}
	sqldb.SetMaxOpenConns(maxOpenConns)
	sqldb.SetMaxIdleConns(maxOpenConns)
	sqldb.SetConnMaxLifetime(connMaxLifetime)
	sqldb.SetConnMaxIdleTime(connMaxIdleTime)
	return bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC"))), nil
}

func openConfig(cfg *mysql.Config) (*sql.DB, error) {
	cfg = cfg.Clone()
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// Import counts duplicates as rows "affected" 0 times by ON DUPLICATE KEY UPDATE id=id:
	// that needs changed rows, not found rows.
	cfg.ClientFoundRows = false
	// After a fail-over the old primary turns read-only: drop such connections.
	cfg.RejectReadOnly = true
	if cfg.Timeout == 0 {
		cfg.Timeout = dialTimeout
	}
	if cfg.Params == nil {
		cfg.Params = make(map[string]string)
	}
	for k, v := range sessionDefaults {
		if _, set := cfg.Params[k]; !set {
			cfg.Params[k] = v
		}
	}
	// Every transaction runs at READ COMMITTED, whatever the DSN says: at REPEATABLE READ
	// concurrent payments on one product deadlock almost always (gap locks of SKIP LOCKED
	// scans). Set per session, so a transaction's BEGIN is one statement.
	delete(cfg.Params, "transaction_isolation")
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: %w", err)
	}
	return sql.OpenDB(connector), nil
}

var databaseName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// CreateDatabase creates the database name (utf8mb4, binary collation) on the server of
// serverDSN if it does not exist yet, and returns serverDSN pointed at it. Tests use it to
// give each package its own database, so packages tested in parallel never see each other's
// rows. name must be 1 to 64 characters of [A-Za-z0-9_].
func CreateDatabase(ctx context.Context, serverDSN, name string) (dsn string, err error) {
	if !databaseName.MatchString(name) {
		return "", fmt.Errorf("mysqlstore: database name %q: must be 1 to 64 characters of A-Z a-z 0-9 _", name)
	}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return "", fmt.Errorf("mysqlstore: parse DSN: %w", err)
	}
	server := cfg.Clone()
	server.DBName = ""
	sqldb, err := openConfig(server)
	if err != nil {
		return "", err
	}
	defer sqldb.Close()
	sqldb.SetMaxOpenConns(1)
	_, err = sqldb.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	if err != nil {
		return "", wrapErr("create database "+name, err)
	}
	cfg.DBName = name
	return cfg.FormatDSN(), nil
}
