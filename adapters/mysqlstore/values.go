package mysqlstore

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/uptrace/bun/schema"

	"cardshop/domain"
)

// sqlValues appends the VALUES rows of a multi-row INSERT as SQL literals, each formatted by
// the dialect's own AppendString and AppendTime, as bun formats the same value bound to a
// placeholder. The batch INSERTs of placed orders are built so, and run with no argument (bun
// passes a statement without arguments through untouched), which spares bun's reflection-based
// placeholder formatter (docs/BENCHMARKS.md); TestSQLValuesFormatAsBunDoes compares the two.
type sqlValues struct {
	b    []byte
	d    schema.Dialect
	rows int  // rows opened so far
	next bool // a value of the open row is written: the next one needs ", "
}

func (v *sqlValues) raw(s string) { v.b = append(v.b, s...) }

// row opens the next row of VALUES ("(", or ", (" after the first); end closes it.
func (v *sqlValues) row() {
	if v.rows > 0 {
		v.raw(", ")
	}
	v.rows++
	v.raw("(")
	v.next = false
}

func (v *sqlValues) end() { v.raw(")") }

// sep writes the ", " before every value of a row but its first.
func (v *sqlValues) sep() {
	if v.next {
		v.raw(", ")
	}
	v.next = true
}

func (v *sqlValues) str(s string) {
	v.sep()
	v.b = v.d.AppendString(v.b, s)
}

// nullStr is s, or NULL for the empty string (nullString's rule).
func (v *sqlValues) nullStr(s string) {
	if s == "" {
		v.null()
		return
	}
	v.str(s)
}

func (v *sqlValues) null() {
	v.sep()
	v.raw("NULL")
}

func (v *sqlValues) int(n int64) {
	v.sep()
	v.b = strconv.AppendInt(v.b, n, 10)
}

// time is t in UTC (as every time the ledger stores).
func (v *sqlValues) time(t time.Time) {
	v.sep()
	v.b = v.d.AppendTime(v.b, t.UTC())
}

// nullTime is t, or NULL for the zero time (nullTime's rule).
func (v *sqlValues) nullTime(t time.Time) {
	if t.IsZero() {
		v.null()
		return
	}
	v.time(t)
}

// nullBytes is the hash as a hex literal, or NULL for the zero hash (an API order's).
func (v *sqlValues) nullBytes(h domain.AccessHash) {
	if h.IsZero() {
		v.null()
		return
	}
	v.sep()
	v.raw("X'")
	v.b = hex.AppendEncode(v.b, h[:])
	v.raw("'")
}
