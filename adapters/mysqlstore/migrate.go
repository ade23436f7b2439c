package mysqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"

	"cardshop/migrations"
)

// migrationsTable is where bun/migrate records the migrations it applied, by number ("0001").
const migrationsTable = "bun_migrations"

// legacyMigrationsTable is where the runner before bun/migrate recorded the versions it applied
// ("0001_init", …). Migrate and Pending read it and never write it: see docs/DESIGN.md,
// "Schema migrations".
const legacyMigrationsTable = "schema_migrations"

// loadMigrations reads the embedded files (package migrations) as bun/migrate names them:
// "0001_init.up.sql" is migration "0001", comment "init".
func loadMigrations() (*migrate.Migrations, error) {
	ms := migrate.NewMigrations()
	if err := ms.Discover(migrations.FS); err != nil {
		return nil, fmt.Errorf("mysqlstore: load migrations: %w", err)
	}
	return ms, nil
}

// newMigrator records a migration in bun_migrations only once it has run to its end, so that
// one that fails halfway is run again, from its first statement, by the next Migrate.
func newMigrator(db *bun.DB, ms *migrate.Migrations) *migrate.Migrator {
	return migrate.NewMigrator(db, ms, migrate.WithTableName(migrationsTable), migrate.WithMarkAppliedOnSuccess(true))
}

// Migrate applies, in name order, the embedded migrations (package migrations) that the
// database has not recorded yet, and returns the versions it applied ("0001_init", …).
//
// It is safe to run from several processes at once: it holds a named server lock (GET_LOCK,
// per database) while it works, so the others wait and then find nothing to do. Versions
// recorded in schema_migrations by the runner before bun/migrate count as applied and are
// copied into bun_migrations. MySQL commits DDL at once, so a migration that fails halfway
// stays half applied and is not recorded; the next Migrate runs it again from its first
// statement, which is why migration files are written to be re-runnable. It uses two of db's
// connections at once: one holds the lock, bun/migrate works on another.
func Migrate(ctx context.Context, db *bun.DB) (applied []string, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
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
	m := newMigrator(db, ms)
	if err := m.Init(ctx); err != nil {
		return nil, wrapErr("migrate: create "+migrationsTable, err)
	}
	if err := adoptLegacy(ctx, db, m); err != nil {
		return nil, err
	}
	group, err := m.Migrate(ctx)
	done := group.Migrations
	if err != nil && len(done) > 0 {
		done = done[:len(done)-1] // the one that failed
	}
	for _, mg := range done {
		applied = append(applied, mg.String())
	}
	if err != nil {
		return applied, wrapErr("migrate", err)
	}
	return applied, nil
}

// adoptLegacy copies into bun_migrations, as one group and with their times, the versions
// that schema_migrations records and bun_migrations lacks.
func adoptLegacy(ctx context.Context, db *bun.DB, m *migrate.Migrator) error {
	legacy, err := legacyVersions(ctx, db)
	if err != nil {
		return wrapErr("migrate: read "+legacyMigrationsTable, err)
	}
	if len(legacy) == 0 {
		return nil
	}
	have, err := m.AppliedMigrations(ctx)
	if err != nil {
		return wrapErr("migrate: read "+migrationsTable, err)
	}
	known := make(map[string]bool, len(have))
	for _, mg := range have {
		known[mg.Name] = true
	}
	group := have.LastGroupID() + 1
	var rows []migrate.Migration
	for _, v := range legacy {
		if !known[v.name] {
			known[v.name] = true
			rows = append(rows, migrate.Migration{Name: v.name, GroupID: group, MigratedAt: v.at})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := db.NewInsert().Model(&rows).ModelTableExpr(migrationsTable).Exec(ctx); err != nil {
		return wrapErr("migrate: copy "+legacyMigrationsTable, err)
	}
	return nil
}

type legacyVersion struct {
	name string // the number: "0001" of "0001_init"
	at   time.Time
}

// legacyVersions reads schema_migrations in version order; a database without it has none.
func legacyVersions(ctx context.Context, db bun.IDB) ([]legacyVersion, error) {
	var rows []struct {
		Version   string    `bun:"version"`
		AppliedAt time.Time `bun:"applied_at"`
	}
	err := db.NewRaw("SELECT version, applied_at FROM "+legacyMigrationsTable+" ORDER BY version").Scan(ctx, &rows)
	if noSuchTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]legacyVersion, len(rows))
	for i, r := range rows {
		n, _, _ := strings.Cut(r.Version, "_")
		out[i] = legacyVersion{name: n, at: r.AppliedAt}
	}
	return out, nil
}

func noSuchTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erNoSuchTable
}

// migrationLock takes the database's migration lock on conn, polling so that ctx can cancel
// the wait, and returns its release. The name is the one the runner before bun/migrate took,
// so that an instance of either version waits for the other during a rolling upgrade.
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

// Pending lists the versions of the embedded migrations that the database has not applied
// ("0001_init", …), in the order Migrate would apply them. It counts schema_migrations too,
// so that a database the runner before bun/migrate left up to date needs no Migrate.
func Pending(ctx context.Context, db *bun.DB) ([]string, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	applied, err := newMigrator(db, ms).AppliedMigrations(ctx)
	if noSuchTable(err) {
		applied, err = nil, nil
	}
	if err != nil {
		return nil, wrapErr("pending migrations", err)
	}
	done := make(map[string]bool, len(applied))
	for _, mg := range applied {
		done[mg.Name] = true
	}
	legacy, err := legacyVersions(ctx, db)
	if err != nil {
		return nil, wrapErr("pending migrations", err)
	}
	for _, v := range legacy {
		done[v.name] = true
	}
	var out []string
	for _, mg := range ms.Sorted() {
		if !done[mg.Name] {
			out = append(out, mg.String())
		}
	}
	return out, nil
}
