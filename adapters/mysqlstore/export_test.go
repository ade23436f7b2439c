package mysqlstore

import (
	"crypto/rand"
	"io/fs"
	"strings"

	"cardshop/domain"
	"cardshop/migrations"
)

// Internals the external tests exercise directly.
var (
	Retryable = retryable
	WrapErr   = wrapErr
	Clip      = clip
)

// Seal seals code for product p with hash as the import does.
func Seal(k *Keyring, p domain.ProductID, code string, hash []byte) []byte {
	sealed, _ := k.seal(p, code, hash)
	return sealed
}

// SealLegacy seals code under the active key as rows of aad_version 1 were sealed: the
// product id alone as additional data.
func SealLegacy(k *Keyring, p domain.ProductID, code string) []byte {
	aead := k.aeads[k.active]
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	ad, _ := additionalData(aadProduct, p, nil)
	return aead.Seal(nonce, nonce, []byte(code), ad)
}

// Hash is the code's de-duplication hash.
func Hash(k *Keyring, code string) []byte { return k.hash(code) }

// SetBatchHooks sets b's test hooks: taken runs when a batch has taken its n members, before
// it writes; beforeCommit inside the batch's transaction, after its INSERTs. Set them before
// the first Atomically.
func SetBatchHooks(b *BatchingLedger, taken func(n int), beforeCommit func()) {
	b.taken, b.beforeCommit = taken, beforeCommit
}

// SetAloneHook sets b's test hook that runs each time a member batched first runs its own
// transaction. Set it before the first Atomically.
func SetAloneHook(b *BatchingLedger, alone func()) { b.alone = alone }

// Queued counts the members waiting in b's lanes, not yet taken by a batch.
func Queued(b *BatchingLedger) int {
	n := 0
	for _, ln := range b.lanes {
		ln.mu.Lock()
		n += len(ln.queue)
		ln.mu.Unlock()
	}
	return n
}

// Statements reads the embedded migration version ("0001_init") and splits it at its
// "--bun:split" lines, as bun/migrate does, for tests that apply a file by hand.
func Statements(version string) ([]string, error) {
	body, err := fs.ReadFile(migrations.FS, version+migrations.Suffix)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(body), "\n--bun:split\n"), nil
}
