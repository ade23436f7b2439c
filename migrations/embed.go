// Package migrations holds cardshop's MySQL/MariaDB schema as numbered SQL files
// (NNNN_name.sql), embedded into the binary. Files are applied in name order, each exactly
// once, by mysqlstore.Migrate, which records them in schema_migrations.
//
// Rules for a migration file: statements end with a semicolon; MySQL runs DDL outside
// transactions, so a file that fails halfway is left half applied and is run again from the
// top on the next Migrate: write every statement so that running it twice is harmless
// (CREATE TABLE IF NOT EXISTS, ADD COLUMN IF NOT EXISTS, …). Never edit a file that has been
// released; add a new one.
//
// It imports only the standard library.
package migrations

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

// FS holds the migration files, *.sql at its root.
//
//go:embed *.sql
var FS embed.FS

// Versions lists the embedded migrations in apply (name) order, each named by its file name
// without ".sql" (e.g. "0001_init"), as schema_migrations records them.
func Versions() []string {
	names, _ := fs.Glob(FS, "*.sql") // the pattern is valid, so Glob cannot fail
	slices.Sort(names)
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".sql")
	}
	return names
}
