package bootstrap_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"cardshop/adapters/adminctl"
	"cardshop/bootstrap"
)

// startService runs the whole service on the memory adapters, as TestServiceEndToEnd does,
// with tweaks applied to its configuration, and returns a client for it; it stops at the end
// of the test.
func startService(t *testing.T, tweaks ...func(*bootstrap.Config)) client {
	t.Helper()
	cfg, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	return runService(t, cfg, io.Discard)
}

// runMain runs the cardshop binary's command line in the test's process.
func runMain(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := bootstrap.Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runCtl runs the cardshopctl binary's command line (the operators' commands) in the test's
// process.
func runCtl(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := adminctl.Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// withStdin makes os.Stdin read text for the rest of the test.
func withStdin(t *testing.T, text string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(w, text)
		_ = w.Close()
	}()
	old := os.Stdin
	os.Stdin = r
	t.Cleanup(func() { os.Stdin = old; _ = r.Close() })
}

func TestImportCodesAndReconcileCommands(t *testing.T) {
	c := startService(t)
	c.want(201, "POST", "/admin/products", adminToken, `{"id":7,"name":"Gift 5","price":500,"max_per_order":5}`, nil)
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)

	// A file with a duplicate, a blank line, a comment, two invalid lines and a CSV line.
	file := writeFile(t, strings.Join([]string{
		"CLI-CODE-0001",
		"CLI-CODE-0002",
		"",
		"# a comment",
		"CLI-CODE-0001", // duplicate (line 5)
		"bad code",      // invalid (line 6): a space
		"x",             // invalid (line 7): too short
		"CLI-CODE-0003,2030-01-01,batch 9",
	}, "\n")+"\n")
	code, out, errOut := runCtl("import-codes", "-url", c.base, "-product", "7", file)
	if code != 0 {
		t.Fatalf("import-codes exited %d: %s %s", code, out, errOut)
	}
	for _, want := range []string{"added       3\nduplicates  1\ninvalid     2\nin pool     0\ncomments    1\n", "line 4: comment\n",
		"line 5: duplicate\n", "line 6: invalid (must not contain spaces)\n", "line 7: invalid (must be 4 to 128 characters)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("import-codes printed %q, want %q in it", out, want)
		}
	}
	if !strings.Contains(errOut, "(100%)") || !strings.Contains(errOut, "answered 200") {
		t.Errorf("no final progress line: %q", errOut)
	}

	// The same file again: everything is a duplicate now.
	if code, out, _ := runCtl("import-codes", "-url", c.base, "-product", "7", "-format", "csv", "-progress", "0", file); code != 0 ||
		!strings.Contains(out, "added       0\nduplicates  4\n") {
		t.Errorf("re-import: %d %q", code, out)
	}

	// From standard input (chunked, size unknown).
	withStdin(t, "CLI-CODE-0004\nCLI-CODE-0005\nCLI-CODE-0004\n")
	code, out, errOut = runCtl("import-codes", "-url", c.base, "-product", "7", "-")
	if code != 0 || !strings.Contains(out, "added       2\nduplicates  1\ninvalid     0\n") || strings.Contains(out, "invalid (") {
		t.Fatalf("import-codes from stdin: %d %q %q", code, out, errOut)
	}
	// Standard input without a final newline: its last line is imported all the same (the
	// command ends what it sends chunked with a newline).
	withStdin(t, "CLI-CODE-0006\nCLI-CODE-0007")
	if code, out, errOut := runCtl("import-codes", "-url", c.base, "-product", "7", "-progress", "0", "-"); code != 0 ||
		!strings.HasPrefix(out, "added       2\n") {
		t.Fatalf("import-codes from stdin without a final newline: %d %q %q", code, out, errOut)
	}
	// Another product's code is refused: a code is unique across the pool.
	c.want(201, "POST", "/admin/products", adminToken, `{"id":8,"name":"Gift 8","price":500,"max_per_order":5}`, nil)
	if code, out, errOut := runCtl("import-codes", "-url", c.base, "-product", "8", "-progress", "0", file); code != 0 ||
		!strings.Contains(out, "added       0\nduplicates  0\ninvalid     2\nin pool     4\n") || !strings.Contains(out, "line 1: in_pool\n") {
		t.Fatalf("import-codes of another product's codes: %d %q %q", code, out, errOut)
	}
	if strings.Contains(errOut, "%") {
		t.Errorf("a percentage for a pipe of unknown size: %q", errOut)
	}

	// An unknown product: exit 1, the service's error code printed.
	code, out, errOut = runCtl("import-codes", "-url", c.base, "-product", "999", file)
	if code != 1 || !strings.Contains(errOut, "404") || !strings.Contains(errOut, `"code":"product_not_found"`) || out != "" {
		t.Errorf("import-codes to an unknown product: %d %q %q", code, out, errOut)
	}
	// A wrong token: 401.
	t.Setenv("CARDSHOP_ADMIN_TOKEN", "wrong-token-0123456789")
	if code, _, errOut := runCtl("import-codes", "-url", c.base, "-product", "7", file); code != 1 || !strings.Contains(errOut, `"code":"unauthorized"`) {
		t.Errorf("import-codes with a wrong token: %d %q", code, errOut)
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)

	// The pool agrees with the gate and the flow.
	code, out, errOut = runCtl("reconcile", "-url", c.base, "-product", "7")
	if code != 0 || !strings.HasSuffix(out, "\n0 differences\n") || strings.Contains(out, "DIFF") {
		t.Fatalf("reconcile: %d %q %q", code, out, errOut)
	}
	for _, want := range []string{"product 7\n", "gate    stock 7, sold 0, frozen false\n", "cards   UNSOLD 7\n",
		"OK  codes SOLD = qty of PAID orders", "want 7  got 7\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("reconcile printed %q, want %q in it", out, want)
		}
	}
	code, out, errOut = runCtl("reconcile", "-url", c.base, "-product", "7", "--repair")
	if code != 0 || !strings.HasPrefix(out, "product 7 (gate rebuilt from the ledger)\n") || !strings.HasSuffix(out, "\n0 differences\n") {
		t.Errorf("reconcile --repair: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCtl("reconcile", "-url", c.base, "-product", "999"); code != 1 || !strings.Contains(errOut, "product_not_found") {
		t.Errorf("reconcile of an unknown product: %d %q", code, errOut)
	}
}

// TestImportCodesPrintsAStoppedImport: an import the service stopped half-way (here over its
// size limit) prints what was imported and from which line to send the rest, and exits 1.
func TestImportCodesPrintsAStoppedImport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			fmt.Fprint(w, `{"id":3}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(413)
		fmt.Fprint(w, `{"code":"body_too_large","message":"the request body is too large; lines 1 to 5 were imported or reported","request_id":"r",
			"import":{"added":4,"duplicates":1,"in_pool":0,"invalid":0,"comments":0,"headers":0,"unterminated":1,
			"skipped":[{"line":3,"reason":"duplicate","detail":"already in this product"},{"line":6,"reason":"unterminated","detail":"the body ended inside this line"}],
			"truncated":false,"through_line":5,"complete":false}}`)
	}))
	defer srv.Close()
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	withStdin(t, "A-0001\nA-0002\nA-0001\nA-0003\nA-0004\nA-0005\n")
	code, out, errOut := runCtl("import-codes", "-url", srv.URL, "-product", "3", "-progress", "0", "-")
	want := "added       4\nduplicates  1\ninvalid     0\nin pool     0\ncut line    1\nline 3: duplicate\n" +
		"line 6: unterminated (the body ended inside this line)\n" +
		"stopped after line 5: lines 1 to 5 are imported or listed above; send the rest from line 6\n"
	if code != 1 || out != want || !strings.Contains(errOut, "413") || !strings.Contains(errOut, "body_too_large") {
		t.Fatalf("stopped import: %d\n%s\nwant\n%s\nstderr %q", code, out, want, errOut)
	}
}

// TestReconcilePrintsDifferences feeds the command a report that disagrees.
func TestReconcilePrintsDifferences(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+adminToken || r.URL.Path != "/admin/products/3/reconcile" {
			http.Error(w, `{"code":"unexpected"}`, 400)
			return
		}
		fmt.Fprint(w, `{"product_id":3,"ok":false,"differences":1,"repaired":false,"gate":null,"cards":{},"orders":{},
			"checks":[{"name":"codes SOLD = qty of PAID orders","want":0,"got":0,"ok":true},{"name":"gate knows the product","want":1,"got":0,"ok":false}]}`)
	}))
	defer srv.Close()
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	code, out, errOut := runCtl("reconcile", "-url", srv.URL, "-product", "3")
	if code != 1 || !strings.HasSuffix(out, "\n1 differences\n") || !strings.Contains(errOut, "1 differences remain") {
		t.Fatalf("reconcile with a difference: %d %q %q", code, out, errOut)
	}
	for _, want := range []string{"gate    unknown", "cards   none\n", "orders  none\n",
		"OK    codes SOLD = qty of PAID orders  want 0  got 0\n", "DIFF  gate knows the product           want 1  got 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("reconcile printed %q, want %q in it", out, want)
		}
	}
}

func TestImportCodesAndReconcileUsage(t *testing.T) {
	for _, cmd := range []string{"import-codes", "reconcile"} {
		code, out, errOut := runCtl(cmd, "-h")
		if code != 0 || out != "" || !strings.Contains(errOut, "Usage: cardshopctl "+cmd) || !strings.Contains(errOut, "-product") ||
			!strings.Contains(errOut, "CARDSHOP_ADMIN_TOKEN") {
			t.Errorf("%s -h: %d %q %q", cmd, code, out, errOut)
		}
	}
	if _, _, errOut := runCtl("import-codes", "-h"); !strings.Contains(errOut, "-format") || !strings.Contains(errOut, "accepts both") {
		t.Errorf("import-codes -h does not say what -format does: %q", errOut)
	}
	if _, _, errOut := runCtl("reconcile", "-h"); !strings.Contains(errOut, "-repair") {
		t.Errorf("reconcile -h does not document -repair: %q", errOut)
	}
	if code, out, _ := runCtl("help"); code != 0 || !strings.Contains(out, "import-codes") || !strings.Contains(out, "reconcile") {
		t.Errorf("help does not list the commands: %q", out)
	}

	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)
	file := writeFile(t, "CODE-0001\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"import-codes", file}, "-product"},
		{[]string{"import-codes", "-product", "1"}, "FILE"},
		{[]string{"import-codes", "-product", "1", file, file}, "FILE"},
		{[]string{"import-codes", "-product", "1", "-format", "xml", file}, "lines or csv"},
		{[]string{"import-codes", "-product", "1", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"reconcile"}, "-product"},
		{[]string{"reconcile", "-product", "1", "extra"}, "-product"},
	} {
		if code, out, errOut := runCtl(c.args...); code != 1 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %q %q, want %q", c.args, code, out, errOut, c.want)
		}
	}
	t.Setenv("CARDSHOP_ADMIN_TOKEN", "")
	for _, args := range [][]string{{"import-codes", "-product", "1", file}, {"reconcile", "-product", "1"}} {
		if code, _, errOut := runCtl(args...); code != 1 || !strings.Contains(errOut, "CARDSHOP_ADMIN_TOKEN") {
			t.Errorf("%v without a token: %d %q", args, code, errOut)
		}
	}
}

// TestImportCodesStreams sends a 200,000-line file to a server that only counts what it gets,
// and checks that the command allocated a small fraction of the file: it streams the file
// instead of reading it into memory. (The memory adapters would keep the codes, which is why
// the service itself is not the receiver here; scripts/import-bench.sh measures both sides.)
func TestImportCodesStreams(t *testing.T) {
	const lines = 200_000
	name := filepath.Join(t.TempDir(), "codes.txt")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range lines {
		fmt.Fprintf(w, "STREAM-%08d-ABCDEFGHIJKLMNOP\n", i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 5<<20 {
		t.Fatalf("the file is only %d bytes", st.Size())
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/admin/products/1" { // the command's first question
			fmt.Fprint(w, `{"id":1}`)
			return
		}
		n, bytesRead := 0, int64(0)
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			n++
			bytesRead += int64(len(sc.Bytes())) + 1
		}
		if sc.Err() != nil || r.ContentLength != st.Size() || bytesRead != st.Size() {
			http.Error(w, fmt.Sprintf(`{"code":"short","read":%d,"err":%q}`, bytesRead, sc.Err()), 400)
			return
		}
		fmt.Fprintf(w, `{"added":%d,"duplicates":0,"invalid":0}`, n)
	}))
	defer srv.Close()
	t.Setenv("CARDSHOP_ADMIN_TOKEN", adminToken)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, out, errOut := runCtl("import-codes", "-url", srv.URL, "-product", "1", name)
	runtime.ReadMemStats(&after)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("added       %d\n", lines)) {
		t.Fatalf("import-codes: %d %q %q", code, out, errOut)
	}
	// TotalAlloc counts every allocation, freed or not (the client's and the test server's):
	// a command that read the file whole would allocate at least its size.
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("file %d bytes, allocated %d bytes while importing it", st.Size(), allocated)
	if allocated > uint64(st.Size())/4 {
		t.Fatalf("allocated %d bytes to send a %d-byte file: it is not streamed", allocated, st.Size())
	}
}
