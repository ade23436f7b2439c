package mysqlstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/mysqlstore"
	"cardshop/adapters/porttest"
	"cardshop/domain"
)

func TestNewKeyringRejectsBadInput(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
	tests := []struct{ name, keys, hash string }{
		{"no keys", "", testHashKey},
		{"no kid", key, testHashKey},
		{"empty kid", ":" + key, testHashKey},
		{"bad kid", "k 1:" + key, testHashKey},
		{"not base64", "k1:!!!", testHashKey},
		{"AES-128 key", "k1:" + short, testHashKey},
		{"duplicate kid", "k1:" + key + ",k1:" + key, testHashKey},
		{"trailing comma", "k1:" + key + ",", testHashKey},
		{"no hash key", "k1:" + key, ""},
		{"short hash key", "k1:" + key, base64.StdEncoding.EncodeToString([]byte("short"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if k, err := mysqlstore.NewKeyring(tt.keys, tt.hash); err == nil {
				t.Fatalf("NewKeyring(%q, %q) = %v, want an error", tt.keys, tt.hash, k)
			} else if strings.Contains(err.Error(), key) {
				t.Fatalf("error shows the key: %v", err)
			}
		})
	}
}

func TestGenerateKeyring(t *testing.T) {
	keys, hash := mysqlstore.GenerateKeyring()
	k, err := mysqlstore.NewKeyring(keys, hash)
	if err != nil {
		t.Fatalf("NewKeyring(GenerateKeyring()): %v", err)
	}
	if again, _ := mysqlstore.GenerateKeyring(); again == keys {
		t.Fatal("GenerateKeyring returned the same keys twice")
	}
	rotated, err := mysqlstore.NewKeyring(testKeyNew+","+keys, hash)
	if err != nil || rotated.ActiveKeyID() != "k2" || !slices.Equal(rotated.KeyIDs(), []string{"k2", k.ActiveKeyID()}) {
		t.Fatalf("rotated keyring = %v, %v", rotated, err)
	}
	secret, _, _ := strings.Cut(keys, ",")
	_, secret, _ = strings.Cut(secret, ":")
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, k); strings.Contains(s, secret) || strings.Contains(s, hash) {
			t.Fatalf("%s of a keyring shows a key: %s", format, s)
		}
	}
}

func newCode(t testing.TB, prefix string) domain.CardCode {
	t.Helper()
	c, err := domain.ParseCardCode(fmt.Sprintf("%s-%016X", prefix, rand.Uint64()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createProduct(t testing.TB, l domain.Store) domain.ProductID {
	t.Helper()
	p, err := domain.NewProduct(porttest.NewProductID(), "mysqlstore test", 100, 10, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Products().Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return p.ID()
}

func orderNo() domain.OrderNo { return domain.NewOrderNo(time.Now(), "mysqlstore", rand.Uint64()) }

// TestCodesEncryptedAtRest looks at the stored row: the code appears nowhere in it, the hash
// is keyed, and the ciphertext is bound to its product.
func TestCodesEncryptedAtRest(t *testing.T) {
	l := newLedger(t)
	ctx := t.Context()
	p := createProduct(t, l)
	code := newCode(t, "PLAINTEXT-CODE")
	if res, err := l.Cards().Import(ctx, p, []domain.CardCode{code}, 1); err != nil || res.Added != 1 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	var (
		cipher, hash []byte
		kid          string
		whole        []byte
	)
	err := rawDB(t).QueryRowContext(ctx, "SELECT code_cipher, key_id, code_hash, CONCAT_WS('|', id, product_id, code_cipher, "+
		"key_id, code_hash, status, IFNULL(order_no, ''), created_at, updated_at) FROM card_stock WHERE product_id = ?", int64(p)).
		Scan(&cipher, &kid, &hash, &whole)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(code.Reveal())
	if bytes.Contains(cipher, plain) || bytes.Contains(whole, plain) || bytes.Contains(whole, []byte("PLAINTEXT")) {
		t.Fatal("the stored row contains the plaintext code")
	}
	if kid != "k1" {
		t.Fatalf("key_id = %q, want the active key k1", kid)
	}
	if unkeyed := sha256.Sum256(plain); bytes.Equal(hash, unkeyed[:]) || len(hash) != 32 {
		t.Fatalf("code_hash is %x, want a 32-byte keyed HMAC, not SHA-256 of the code", hash)
	}
	if len(cipher) != 12+len(plain)+16 {
		t.Fatalf("code_cipher has %d bytes, want nonce (12) + code (%d) + tag (16)", len(cipher), len(plain))
	}

	// The same code encrypts differently each time (random nonce).
	k := keyring(t, testKeyOld)
	if again := mysqlstore.Seal(k, p, code.Reveal(), hash); bytes.Equal(again, cipher) {
		t.Fatal("the same code has the same ciphertext twice")
	}
	// Another product cannot import it: a code is unique across the pool.
	q := createProduct(t, l)
	if res, err := l.Cards().Import(ctx, q, []domain.CardCode{code}, 1); err != nil || res.InPool != 1 || res.Added != 0 {
		t.Fatalf("Import for another product = %+v, %v; want it refused as in the pool", res, err)
	}

	no := orderNo()
	cards, err := l.Cards().Allocate(ctx, p, no, 1)
	if err != nil || len(cards) != 1 || cards[0].Code.Reveal() != code.Reveal() {
		t.Fatalf("Allocate = %v, %v; want the imported code", cards, err)
	}
	if s := fmt.Sprintf("%v %+v", cards[0], cards); strings.Contains(s, code.Reveal()) {
		t.Fatalf("a printed card shows its code: %s", s)
	}

	// A ciphertext moved to another product's row does not decrypt.
	if _, err := rawDB(t).ExecContext(ctx, "UPDATE card_stock SET product_id = ? WHERE order_no = ?", int64(q)+1, string(no)); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Cards().Cards(ctx, no); !errors.Is(err, mysqlstore.ErrUndecryptable) || got != nil {
		t.Fatalf("Cards of a moved row = %v, %v; want ErrUndecryptable", got, err)
	}
}

// TestKeyRotation: a new active key encrypts new codes, old codes still decrypt with the
// retired key, de-duplication survives the rotation, and a keyring that lost the old key
// refuses (never returns garbage).
func TestKeyRotation(t *testing.T) {
	db := openDB(t)
	ctx := t.Context()
	old := mysqlstore.New(db, keyring(t, testKeyOld))
	rotated := mysqlstore.New(db, keyring(t, testKeyNew+","+testKeyOld))
	newOnly := mysqlstore.New(db, keyring(t, testKeyNew))

	p := createProduct(t, old)
	before := []domain.CardCode{newCode(t, "OLD"), newCode(t, "OLD")}
	if res, err := old.Cards().Import(ctx, p, before, 1); err != nil || res.Added != 2 {
		t.Fatalf("Import under k1 = %+v, %v", res, err)
	}
	after := newCode(t, "NEW")
	res, err := rotated.Cards().Import(ctx, p, []domain.CardCode{before[0], after, before[1]}, 1)
	if err != nil || res.Added != 1 || res.Duplicates != 2 || res.InPool != 0 {
		t.Fatalf("Import after rotation = %+v, %v; want 1 added, the 2 old codes duplicates", res, err)
	}

	var kids []struct {
		KeyID string `bun:"key_id"`
		N     int    `bun:"n"`
	}
	if err := db.NewRaw("SELECT key_id, COUNT(*) AS n FROM card_stock WHERE product_id = ? GROUP BY key_id ORDER BY key_id",
		int64(p)).Scan(ctx, &kids); err != nil {
		t.Fatal(err)
	}
	if len(kids) != 2 || kids[0].KeyID != "k1" || kids[0].N != 2 || kids[1].KeyID != "k2" || kids[1].N != 1 {
		t.Fatalf("codes by key = %+v, want 2 under k1 and 1 under k2", kids)
	}

	no := orderNo()
	cards, err := rotated.Cards().Allocate(ctx, p, no, 3)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cards {
		got = append(got, c.Code.Reveal())
	}
	want := []string{before[0].Reveal(), before[1].Reveal(), after.Reveal()}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rotated keyring decrypted %d codes, not the imported ones", len(got))
	}
	if read, err := rotated.Cards().Cards(ctx, no); err != nil || len(read) != 3 {
		t.Fatalf("Cards with the rotated keyring = %d cards, %v", len(read), err)
	}

	for name, l := range map[string]*mysqlstore.Ledger{"without k1": newOnly, "without k2": old} {
		read, err := l.Cards().Cards(ctx, no)
		if !errors.Is(err, mysqlstore.ErrUndecryptable) || read != nil {
			t.Fatalf("Cards with a keyring %s = %d cards, %v; want ErrUndecryptable", name, len(read), err)
		}
	}
}
