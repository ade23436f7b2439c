package mysqlstore_test

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/domain"
	"cardshop/migrations"
)

// TestCiphertextBoundToItsRow: a database writer who swaps two codes' ciphertexts within a
// product, or copies one (with its hash) into another product's row, gets an error on the
// read, never a code; rows sealed before the hash was part of the additional data still
// decrypt (also after a key rotation), and a swap among them is caught by the hash check.
func TestCiphertextBoundToItsRow(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	db := rawDB(t)
	p, q := createProduct(t, l), createProduct(t, l)
	codes := []domain.CardCode{newCode(t, "ROW-A"), newCode(t, "ROW-B")}
	if res, err := l.Cards().Import(ctx, p, codes, 1); err != nil || res.Added != 2 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	no := orderNo()
	if _, err := l.Cards().Allocate(ctx, p, no, 2); err != nil {
		t.Fatal(err)
	}
	var ids [2]int64
	if err := db.QueryRowContext(ctx, "SELECT MIN(id), MAX(id) FROM card_stock WHERE order_no = ?", string(no)).Scan(&ids[0], &ids[1]); err != nil {
		t.Fatal(err)
	}
	var version int
	if err := db.QueryRowContext(ctx, "SELECT MIN(aad_version) FROM card_stock WHERE order_no = ?", string(no)).Scan(&version); err != nil || version != 2 {
		t.Fatalf("aad_version %d (%v), want 2 for new rows", version, err)
	}
	swap := func(cols string) {
		t.Helper()
		// A multi-table UPDATE reads both rows before writing: a swap in one statement.
		if _, err := db.ExecContext(ctx, "UPDATE card_stock a JOIN card_stock b ON a.id = ? AND b.id = ? "+
			"SET "+cols, ids[0], ids[1]); err != nil {
			t.Fatal(err)
		}
	}
	wantRefused := func(what string) {
		t.Helper()
		if got, err := l.Cards().Cards(ctx, no); !errors.Is(err, mysqlstore.ErrUndecryptable) || got != nil {
			t.Fatalf("Cards after %s = %v, %v; want ErrUndecryptable", what, got, err)
		}
	}
	wantRead := func() {
		t.Helper()
		got, err := l.Cards().Cards(ctx, no)
		if err != nil || len(got) != 2 || got[0].Code.Reveal() != codes[0].Reveal() || got[1].Code.Reveal() != codes[1].Reveal() {
			t.Fatalf("Cards = %v, %v; want the two imported codes in order", got, err)
		}
	}
	wantRead()
	swap("a.code_cipher = b.code_cipher, b.code_cipher = a.code_cipher")
	wantRefused("swapping two rows' ciphertexts")
	swap("a.code_cipher = b.code_cipher, b.code_cipher = a.code_cipher")
	wantRead()

	// Copying a row's ciphertext and hash into another product's row.
	if _, err := db.ExecContext(ctx, "UPDATE card_stock SET product_id = ? WHERE id = ?", int64(q), ids[0]); err != nil {
		t.Fatal(err)
	}
	wantRefused("moving a row to another product")
	if _, err := db.ExecContext(ctx, "UPDATE card_stock SET product_id = ? WHERE id = ?", int64(p), ids[0]); err != nil {
		t.Fatal(err)
	}
	wantRead()

	// Rows written with the product alone as additional data (aad_version 1, the column's
	// default, as the previous version wrote them) decrypt with a rotated keyring, and are
	// checked against their hash.
	old := keyring(t, testKeyOld)
	rotated := mysqlstore.New(openDB(t), keyring(t, testKeyNew+","+testKeyOld))
	r := createProduct(t, l)
	legacy := []domain.CardCode{newCode(t, "V1-A"), newCode(t, "V1-B")}
	for _, c := range legacy {
		if _, err := db.ExecContext(ctx, "INSERT INTO card_stock (product_id, code_cipher, key_id, code_hash, status, created_at, updated_at) "+
			"VALUES (?, ?, 'k1', ?, 'UNSOLD', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
			int64(r), mysqlstore.SealLegacy(old, r, c.Reveal()), mysqlstore.Hash(old, c.Reveal())); err != nil {
			t.Fatal(err)
		}
	}
	no = orderNo()
	got, err := rotated.Cards().Allocate(ctx, r, no, 2)
	if err != nil || len(got) != 2 || got[0].Code.Reveal() != legacy[0].Reveal() || got[1].Code.Reveal() != legacy[1].Reveal() {
		t.Fatalf("Allocate of aad_version 1 rows = %v, %v; want both codes", got, err)
	}
	ids = [2]int64{got[0].ID, got[1].ID}
	swap("a.code_cipher = b.code_cipher, b.code_cipher = a.code_cipher")
	if got, err := rotated.Cards().Cards(ctx, no); !errors.Is(err, mysqlstore.ErrUndecryptable) || got != nil {
		t.Fatalf("Cards after swapping aad_version 1 ciphertexts = %v, %v; want ErrUndecryptable", got, err)
	}
	// A row claiming a version that does not exist is refused.
	swap("a.code_cipher = b.code_cipher, b.code_cipher = a.code_cipher, a.aad_version = 9")
	if got, err := rotated.Cards().Cards(ctx, no); !errors.Is(err, mysqlstore.ErrUndecryptable) || got != nil {
		t.Fatalf("Cards of aad_version 9 = %v, %v; want ErrUndecryptable", got, err)
	}
}

// TestMigrationMakesCodesUniqueAcrossThePool applies 0004 to a database that already holds a
// code in two products: the migration succeeds (twice: it is re-runnable), keeps both rows and
// marks the later one, and from then on no writer can add a code of another product, not even
// one that does not know the new columns.
func TestMigrationMakesCodesUniqueAcrossThePool(t *testing.T) {
	openDB(t) // the service check
	ctx := t.Context()
	const name = "cardshop_test_mysqlstore_0004"
	server, err := mysqlstore.Open(porttest.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, err := server.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		t.Fatal(err)
	}
	dsn, err := mysqlstore.CreateDatabase(ctx, porttest.MySQLDSN, name)
	if err != nil {
		t.Fatal(err)
	}
	db, err := mysqlstore.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	apply := func(version string) {
		t.Helper()
		stmts, err := mysqlstore.Statements(version)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if _, err := db.DB.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", version, err)
			}
		}
	}
	// Every migration but 0004, so that the store of this version can write the products; the
	// others touch neither card_stock's keys nor what 0004 reads, but 0025, which changes
	// pool_hash when it exists (it is applied again after 0004).
	for _, v := range migrations.Versions() {
		if v != "0004_code_unique" {
			apply(v)
		}
	}
	k := keyring(t, testKeyOld)
	l := mysqlstore.New(db, k)
	p, q, r := createProduct(t, l), createProduct(t, l), createProduct(t, l)
	shared, own := newCode(t, "SHARED"), newCode(t, "OWN")
	insert := func(p domain.ProductID, c domain.CardCode) error {
		_, err := db.DB.ExecContext(ctx, "INSERT INTO card_stock (product_id, code_cipher, key_id, code_hash, status, created_at, updated_at) "+
			"VALUES (?, ?, 'k1', ?, 'UNSOLD', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
			int64(p), mysqlstore.SealLegacy(k, p, c.Reveal()), mysqlstore.Hash(k, c.Reveal()))
		return err
	}
	for _, row := range []struct {
		p domain.ProductID
		c domain.CardCode
	}{{p, shared}, {q, shared}, {p, own}} {
		if err := insert(row.p, row.c); err != nil {
			t.Fatal(err)
		}
	}
	apply("0004_code_unique")
	apply("0004_code_unique")
	apply("0025_multi_use_codes")

	var marked []int64
	if err := db.NewRaw("SELECT product_id FROM card_stock WHERE pool_duplicate").Scan(ctx, &marked); err != nil {
		t.Fatal(err)
	}
	if len(marked) != 1 || marked[0] != int64(q) {
		t.Fatalf("rows marked pool_duplicate in products %v, want the later copy (product %d) only", marked, q)
	}
	// A writer that does not know the new columns cannot add a code of another product.
	var me *mysql.MySQLError
	if err := insert(r, own); !errors.As(err, &me) || me.Number != 1062 {
		t.Fatalf("insert of another product's code: %v, want duplicate key 1062", err)
	}
	res, err := l.Cards().Import(ctx, r, []domain.CardCode{shared, own, newCode(t, "FRESH")}, 1)
	if err != nil || res.Added != 1 || res.InPool != 2 {
		t.Fatalf("Import after the migration = %+v, %v; want 1 added, 2 in the pool", res, err)
	}
	// The rows written before the migration still decrypt.
	cards, err := l.Cards().Allocate(ctx, p, orderNo(), 2)
	if err != nil || len(cards) != 2 || cards[0].Code.Reveal() != shared.Reveal() || cards[1].Code.Reveal() != own.Reveal() {
		t.Fatalf("Allocate of the rows written before 0004 = %v, %v", cards, err)
	}
}
