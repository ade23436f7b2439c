package mysqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"

	"cardshop/migrations"
)

// migration is one embedded file: version is its name without ".sql" (e.g. "0001_init").
type migration struct {
	version    string
	statements []string
}

var migrationName = regexp.MustCompile(`^([0-9]{4,})_[A-Za-z0-9_]+\.sql$`)

// loadMigrations reads fsys's *.sql files in name order and splits each into statements.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	seen := make(map[string]string)
	out := make([]migration, 0, len(names))
	for _, name := range names {
		m := migrationName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("migration %s: name must be NNNN_words.sql", name)
		}
		if prev, dup := seen[m[1]]; dup {
			return nil, fmt.Errorf("migrations %s and %s share the number %s", prev, name, m[1])
		}
		seen[m[1]] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		stmts, err := splitStatements(string(body))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		out = append(out, migration{version: strings.TrimSuffix(name, ".sql"), statements: stmts})
	}
	return out, nil
}

// splitStatements splits a SQL script at the semicolons that end statements, skipping those
// inside quotes ('…', "…", `…`) and comments (-- …, # …, /* … */). Fragments holding only
// comments and white space are dropped. DELIMITER is not supported, so a migration cannot
// define a stored routine whose body holds semicolons.
func splitStatements(script string) ([]string, error) {
	var out []string
	start, hasCode := 0, false
	flush := func(end int) {
		if hasCode {
			out = append(out, strings.TrimSpace(script[start:end]))
		}
		start, hasCode = end+1, false
	}
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for ; j < len(script); j++ {
				if script[j] == '\\' && c != '`' {
					j++
					continue
				}
				if script[j] == c {
					if j+1 < len(script) && script[j+1] == c { // doubled quote
						j++
						continue
					}
					break
				}
			}
			if j >= len(script) {
				return nil, fmt.Errorf("unterminated %c quote at byte %d", c, i)
			}
			i, hasCode = j, true
		case c == '#' || (c == '-' && strings.HasPrefix(script[i:], "--") &&
			(i+2 == len(script) || strings.ContainsRune(" \t\r\n", rune(script[i+2])))):
			j := strings.IndexByte(script[i:], '\n')
			if j < 0 {
				i = len(script)
			} else {
				i += j
			}
		case c == '/' && strings.HasPrefix(script[i:], "/*"):
			j := strings.Index(script[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("unterminated comment at byte %d", i)
			}
			if strings.HasPrefix(script[i:], "/*!") || strings.HasPrefix(script[i:], "/*M!") {
				hasCode = true // an executable comment is code to the server
			}
			i += j + 3
		case c == ';':
			flush(i)
		case c != ' ' && c != '\t' && c != '\r' && c != '\n':
			hasCode = true
		}
	}
	flush(len(script))
	return out, nil
}

const createMigrationsTable = "CREATE TABLE IF NOT EXISTS schema_migrations (" +
	"version VARCHAR(255) NOT NULL PRIMARY KEY, applied_at DATETIME(6) NOT NULL" +
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

// Migrate applies the embedded migrations (package migrations) that the database has not
// recorded in schema_migrations yet, in name order, and returns the versions it applied.
//
// It is safe to run from several processes at once: it holds a named server lock
// (GET_LOCK, per database) while it works, so the others wait and then find nothing to do.
// MySQL commits DDL at once, so a migration that fails halfway stays half applied and is not
// recorded; the next Migrate runs it again from its first statement, which is why migration
// files are written to be re-runnable (see package migrations).
func Migrate(ctx context.Context, db *bun.DB) (applied []string, err error) {
	all, err := loadMigrations(migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: load migrations: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, wrapErr("migrate: connect", err)
	}
	defer conn.Close()
	release, err := migrationLock(ctx, conn)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := release(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if _, err := conn.Conn.ExecContext(ctx, createMigrationsTable); err != nil {
		return nil, wrapErr("migrate: create schema_migrations", err)
	}
	done, err := appliedVersions(ctx, conn)
	if err != nil {
		return nil, wrapErr("migrate: read schema_migrations", err)
	}
	for _, m := range all {
		if done[m.version] {
			continue
		}
		for i, stmt := range m.statements {
			// The raw connection, not Bun's: a migration is SQL text, not a template whose '?'
			// would be taken for placeholders.
			if _, err := conn.Conn.ExecContext(ctx, stmt); err != nil {
				return applied, wrapErr(fmt.Sprintf("migrate %s statement %d", m.version, i+1), err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
			m.version, time.Now().UTC()); err != nil {
			return applied, wrapErr("migrate: record "+m.version, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

// migrationLock takes the database's migration lock on conn, polling so that ctx can cancel
// the wait, and returns its release.
func migrationLock(ctx context.Context, conn bun.Conn) (release func() error, err error) {
	var dbName sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return nil, wrapErr("migrate: current database", err)
	}
	if !dbName.Valid {
		return nil, errors.New("migrate: the DSN names no database")
	}
	// GET_LOCK names are server-wide: one per database, short enough for MySQL's 64 characters.
	name := fmt.Sprintf("cardshop.migrate.%x", sha256.Sum256([]byte(dbName.String)))[:40]
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", name).Scan(&got); err != nil {
			return nil, wrapErr("migrate: take lock", err)
		}
		if got.Valid && got.Int64 == 1 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, wrapErr("migrate: wait for another migration", err)
		}
	}
	return func() error {
		var got sql.NullInt64
		err := conn.QueryRowContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", name).Scan(&got)
		if err != nil {
			// The lock lives as long as the session: close the session rather than hand a
			// connection that still holds it back to the pool.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			return wrapErr("migrate: release lock", err)
		}
		return nil
	}, nil
}

func appliedVersions(ctx context.Context, conn bun.IConn) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := make(map[string]bool)
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		done[v] = true
	}
	return done, rows.Err()
}

// Pending lists the versions of the embedded migrations that the database has not applied,
// in the order Migrate would apply them.
func Pending(ctx context.Context, db *bun.DB) ([]string, error) {
	all, err := loadMigrations(migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: load migrations: %w", err)
	}
	done, err := appliedVersions(ctx, db)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erNoSuchTable {
		done, err = map[string]bool{}, nil
	}
	if err != nil {
		return nil, wrapErr("pending migrations", err)
	}
	var out []string
	for _, m := range all {
		if !done[m.version] {
			out = append(out, m.version)
		}
	}
	return out, nil
}
