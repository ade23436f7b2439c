package mysqlstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"cardshop/domain"
)

// ErrUndecryptable means a stored card code cannot be decrypted: the keyring lacks the key it
// was encrypted with, the ciphertext does not authenticate (wrong key, tampered row, a
// ciphertext moved to another row or product), or the code it holds is not the one the row's
// code_hash names. Such a code is never served.
var ErrUndecryptable = errors.New("mysqlstore: card code cannot be decrypted")

// Keyring encrypts card codes at rest and computes their de-duplication hash.
//
// Codes are sealed with AES-256-GCM under the active key, a random 96-bit nonce per code, and
// additional data binding the ciphertext to its row: the product id and the row's code_hash
// (AAD version 2). A ciphertext copied to another product's row, or swapped with another row's
// of the same product, does not decrypt; and opening checks that the HMAC of the decrypted code
// is the row's code_hash. Rows sealed before version 2 (additional data = the product id alone,
// aad_version 1) still decrypt, and get the HMAC check. The row records the key id, so after a
// rotation old codes still decrypt with the retired key while new ones use the new active key.
// The hash is HMAC-SHA256 under a separate key that never rotates: a code re-imported after a
// rotation is still found in the pool.
//
// A Keyring is safe for concurrent use. It never prints its keys.
type Keyring struct {
	active  string
	kids    []string
	aeads   map[string]cipher.AEAD
	hashKey []byte
}

var keyID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// minHashKey is the shortest HMAC key accepted, in bytes.
const minHashKey = 16

// NewKeyring builds a keyring from keys, "kid:base64key[,kid:base64key…]", and hashKey, a
// base64 secret of at least 16 bytes. Each key decodes to 32 bytes (AES-256); a key id is 1 to
// 32 characters of [A-Za-z0-9_.-]. The first key is the active one, used for new codes; all are
// used to decrypt. To rotate, put a new key first and keep the old ones until no row uses
// them. Never change hashKey: codes are de-duplicated by it.
func NewKeyring(keys string, hashKey string) (*Keyring, error) {
	k := &Keyring{aeads: make(map[string]cipher.AEAD)}
	for _, entry := range strings.Split(keys, ",") {
		entry = strings.TrimSpace(entry)
		kid, b64, ok := strings.Cut(entry, ":")
		if !ok || !keyID.MatchString(kid) {
			return nil, fmt.Errorf("mysqlstore: keyring entry %d: want kid:base64key with a kid of 1 to 32 characters of A-Z a-z 0-9 _ . -", len(k.kids)+1)
		}
		if _, dup := k.aeads[kid]; dup {
			return nil, fmt.Errorf("mysqlstore: keyring: key id %q appears twice", kid)
		}
		raw, err := decodeBase64(b64)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("mysqlstore: keyring key %q: want 32 bytes in base64", kid)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: keyring key %q: %w", kid, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: keyring key %q: %w", kid, err)
		}
		k.aeads[kid] = aead
		k.kids = append(k.kids, kid)
	}
	k.active = k.kids[0]
	hk, err := decodeBase64(strings.TrimSpace(hashKey))
	if err != nil || len(hk) < minHashKey {
		return nil, fmt.Errorf("mysqlstore: keyring hash key: want at least %d bytes in base64", minHashKey)
	}
	k.hashKey = hk
	return k, nil
}

func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// GenerateKeyring returns a fresh random keys string (one key, with a random key id) and hash
// key in the formats NewKeyring reads, for tests, development and first installs.
func GenerateKeyring() (keys, hashKey string) {
	kid := make([]byte, 4)
	key := make([]byte, 32)
	hk := make([]byte, 32)
	for _, b := range [][]byte{kid, key, hk} {
		_, _ = rand.Read(b) // crypto/rand.Read never fails
	}
	return fmt.Sprintf("k%x:%s", kid, base64.StdEncoding.EncodeToString(key)), base64.StdEncoding.EncodeToString(hk)
}

// ActiveKeyID returns the id of the key new codes are encrypted with.
func (k *Keyring) ActiveKeyID() string { return k.active }

// KeyIDs returns the ids of every key, the active one first.
func (k *Keyring) KeyIDs() []string { return append([]string(nil), k.kids...) }

// String names the keys, never their bytes.
func (k *Keyring) String() string {
	return fmt.Sprintf("Keyring(active=%s, keys=%s)", k.active, strings.Join(k.kids, ","))
}

// GoString names the keys, never their bytes.
func (k *Keyring) GoString() string { return k.String() }

// The additional-data versions of a sealed code (card_stock.aad_version).
const (
	aadProduct     = 1 // the product id
	aadProductHash = 2 // the product id and the code's hash: what seal writes
)

func additionalData(version int, p domain.ProductID, hash []byte) ([]byte, error) {
	switch version {
	case aadProduct:
		return binary.BigEndian.AppendUint64([]byte("cardshop.card.v1:"), uint64(p)), nil //nolint:gosec // G115: the id's bits, as written since v1
	case aadProductHash:
		return append(binary.BigEndian.AppendUint64([]byte("cardshop.card.v2:"), uint64(p)), hash...), nil //nolint:gosec // G115: as above
	}
	return nil, fmt.Errorf("%w: unknown additional-data version %d", ErrUndecryptable, version)
}

// seal encrypts code for product p under the active key: nonce || ciphertext+tag, with the
// product and hash (the code's hash, stored beside it) as additional data, version
// aadProductHash.
func (k *Keyring) seal(p domain.ProductID, code string, hash []byte) (sealed []byte, kid string) {
	aead := k.aeads[k.active]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(code)+aead.Overhead())
	_, _ = rand.Read(nonce)
	ad, _ := additionalData(aadProductHash, p, hash) // a known version
	return aead.Seal(nonce, nonce, []byte(code), ad), k.active
}

// open decrypts a sealed code of product p whose row holds hash and the additional-data
// version, and checks that the code's hash is the row's.
func (k *Keyring) open(p domain.ProductID, kid string, version int, hash, sealed []byte) (domain.CardCode, error) {
	aead, ok := k.aeads[kid]
	if !ok {
		return domain.CardCode{}, fmt.Errorf("%w: key %q is not in the keyring", ErrUndecryptable, kid)
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return domain.CardCode{}, fmt.Errorf("%w: ciphertext too short", ErrUndecryptable)
	}
	ad, err := additionalData(version, p, hash)
	if err != nil {
		return domain.CardCode{}, err
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], ad)
	if err != nil {
		return domain.CardCode{}, fmt.Errorf("%w: key %q: %w", ErrUndecryptable, kid, err)
	}
	if !hmac.Equal(k.hash(string(plain)), hash) {
		return domain.CardCode{}, fmt.Errorf("%w: the code is not the one the row's code_hash names", ErrUndecryptable)
	}
	return domain.RehydrateCardCode(string(plain)), nil
}

// hash is the code's de-duplication hash, stable across key rotations.
func (k *Keyring) hash(code string) []byte {
	m := hmac.New(sha256.New, k.hashKey)
	m.Write([]byte(code))
	return m.Sum(nil)
}

// sealSecret encrypts a secret setting under the active key, bound to label (its owner: a
// ciphertext moved to another owner's row does not decrypt): nonce || ciphertext+tag.
func (k *Keyring) sealSecret(label string, plain []byte) (sealed []byte, kid string) {
	aead := k.aeads[k.active]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plain, []byte("cardshop.secret.v1:"+label)), k.active
}

// openSecret decrypts what sealSecret sealed for label under the key kid.
func (k *Keyring) openSecret(label, kid string, sealed []byte) ([]byte, error) {
	aead, ok := k.aeads[kid]
	if !ok {
		return nil, fmt.Errorf("%w: key %q is not in the keyring", ErrUndecryptable, kid)
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: ciphertext too short", ErrUndecryptable)
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte("cardshop.secret.v1:"+label))
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %w", ErrUndecryptable, kid, err)
	}
	return plain, nil
}
