package bootstrap

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"

	"cardshop/adapters/mysqlstore"
)

//nolint:gosec // G101: the usage text of the secrets command, not a credential
const secretsUsage = `Usage: cardshop secrets

Prints fresh random values (crypto/rand) for every secret cardshop itself needs, one
KEY=value line each, in the form a shell ("set -a; . FILE; set +a"), docker's --env-file and
systemd's EnvironmentFile read:

  CARDSHOP_ADMIN_TOKEN, CARDSHOP_PAYMENT_SECRET, CARDSHOP_TOKEN_SECRET,
  CARDSHOP_WEBHOOK_SECRET   32 random bytes, base64url (43 characters)
  CARDSHOP_CODE_KEYS        a new key id and a 32-byte AES-256 key, kid:base64
  CARDSHOP_CODE_HASH_KEY    32 random bytes, base64

Nothing is written anywhere else: redirect the output to a file only you can read. A shop that
already holds codes keeps its CARDSHOP_CODE_HASH_KEY (codes are found by it) and puts the new
CARDSHOP_CODE_KEYS entry before its current keys (the first encrypts, all decrypt). The
payment secret and the webhook secret are shared with the storefront: give it the same.
Payment providers' keys come from the providers, not from here.
`

// secretsCmd prints fresh values for every secret cardshop generates itself.
func secretsCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("secrets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, secretsUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArguments(fs); err != nil {
		return err
	}
	fmt.Fprintln(stdout, `# Fresh secrets from "cardshop secrets". Keep this file private; see "cardshop secrets -h".`)
	for _, kv := range freshSecrets() {
		fmt.Fprintf(stdout, "%s=%s\n", kv[0], kv[1])
	}
	return nil
}

// freshSecrets returns a name and a fresh value for every secret cardshop generates itself,
// each strong enough for checkSecrets.
func freshSecrets() [][2]string {
	keys, hash := mysqlstore.GenerateKeyring()
	return [][2]string{
		{"CARDSHOP_ADMIN_TOKEN", randomToken()},
		{"CARDSHOP_PAYMENT_SECRET", randomToken()},
		{"CARDSHOP_TOKEN_SECRET", randomToken()},
		{"CARDSHOP_WEBHOOK_SECRET", randomToken()},
		{"CARDSHOP_CODE_KEYS", keys},
		{"CARDSHOP_CODE_HASH_KEY", hash},
	}
}

// randomToken is 32 random bytes in base64url: no character a shell, an env file or an HTTP
// header would read otherwise. One that happens to spell a placeholder word (a few in a
// million) is drawn again, so that every value printed passes checkSecrets.
func randomToken() string {
	b := make([]byte, 32)
	for {
		_, _ = rand.Read(b) // crypto/rand.Read never fails
		if t := base64.RawURLEncoding.EncodeToString(b); placeholder(t) == "" && distinct(t) >= minDistinct {
			return t
		}
	}
}
