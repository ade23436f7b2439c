// Package migrations holds cardshop's MySQL/MariaDB schema as numbered SQL files in
// bun/migrate's naming (NNNN_name.up.sql), embedded into the binary. mysqlstore.Migrate
// applies them in name order, each exactly once, and records them in bun_migrations.
//
// Rules for a migration file: one statement between two "--bun:split" lines (bun/migrate
// sends each part as one query, and the connection does not allow several statements in
// one); MySQL runs DDL outside transactions, so a file that fails halfway is left half applied
// and is run again from the top on the next Migrate: write every statement so that running it
// twice is harmless (CREATE TABLE IF NOT EXISTS, ADD COLUMN IF NOT EXISTS, …). Never edit a
// file that has been released; add a new one.
//
// It imports only the standard library.
package migrations

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

// FS holds the migration files, *.up.sql at its root.
//
//go:embed *.sql
var FS embed.FS

// Suffix ends every migration file's name.
const Suffix = ".up.sql"

// Versions lists the embedded migrations in apply (name) order, each named by its file name
// without Suffix (e.g. "0001_init"), as mysqlstore.Migrate and Pending report them.
func Versions() []string {
	names, _ := fs.Glob(FS, "*.sql") // the pattern is valid, so Glob cannot fail
	slices.Sort(names)
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, Suffix)
	}
	return names
}
