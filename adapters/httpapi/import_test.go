package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/httpapi"
	"cardshop/domain"
)

// TestAdminImportReportsEveryLine: the answer lists every line not imported with its number
// and reason, and keeps the fields older clients read.
func TestAdminImportReportsEveryLine(t *testing.T) {
	h := newHarness(t)
	h.createProduct(1, 100, 5)
	h.createProduct(2, 100, 5)
	h.importCodes(2, "OTHER-0001")
	body := "code\n# comment\n#HASH-0001\nGOOD-0001\nＧＯＯＤ－０００１\nOTHER-0001\nCAFE\u0301-0001\n\nx\n"
	r := h.do("POST", "/admin/products/1/codes", strings.NewReader(body), "Authorization", bearer(adminToken), "Content-Type", "text/plain")
	wantStatus(t, r, 200)
	var rep importJSON
	r.decode(t, &rep)
	if got, want := rep.skippedLines(), "1:header 2:comment 3:comment 5:duplicate 6:in_pool 7:invalid 9:invalid"; got != want {
		t.Fatalf("skipped %q, want %q", got, want)
	}
	if rep.Added != 1 || rep.Duplicates != 1 || rep.InPool != 1 || rep.Invalid != 2 || fmt.Sprint(rep.InvalidLines) != "[7 9]" ||
		rep.Comments != 2 || rep.Headers != 1 || rep.Truncated || rep.ThroughLine != 9 || !rep.Complete {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(rep.Skipped[5].Detail, "U+0301") {
		t.Fatalf("invalid line 7: reason %q, want the character named", rep.Skipped[5].Detail)
	}
	if c := h.cardCounts(2); c[domain.CardUnsold] != 1 {
		t.Fatalf("product 2 pool %v", c)
	}
}

// rawImport sends an import's head and body bytes over TCP, half-closes the connection when
// cut, and returns the answer (checked against openapi.json).
func rawImport(t *testing.T, addr, head, body string, cut bool) (int, errorJSON, importJSON) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /admin/products/1/codes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s\r\n%s", adminToken, head, body)
	if cut {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	checkSpec(t, "POST", "/admin/products/1/codes", res.StatusCode, res.Header, b)
	var e errorJSON
	var rep importJSON
	if res.StatusCode == 200 {
		err = json.Unmarshal(b, &rep)
	} else {
		err = json.Unmarshal(b, &e)
	}
	if err != nil {
		t.Fatalf("answer %d %s: %v", res.StatusCode, b, err)
	}
	return res.StatusCode, e, rep
}

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// TestAdminImportOfACutBodyNeverImportsItsLastLine: a chunked upload over the limit, a body
// shorter than its Content-Length and a chunked body cut between two chunks import their
// complete lines only; the partial last line — a valid code each time — is reported as
// unterminated, and an error answer carries the report.
func TestAdminImportOfACutBodyNeverImportsItsLastLine(t *testing.T) {
	h := newHarness(t, func(c *httpapi.Config) { c.MaxImportBytes = 64 })
	h.createProduct(1, 100, 5)
	addr := strings.TrimPrefix(serve(t, h), "http://")

	// Chunked, over the 64-byte limit: five 12-byte lines, then "LIMIT" of the sixth is where
	// the limit falls.
	lines := strings.Repeat("LIMIT-00000\n", 5) + "LIMIT-00006\n"
	status, e, _ := rawImport(t, addr, "Transfer-Encoding: chunked\r\n", chunk(lines)+chunk(""), false)
	if status != 413 || e.Code != "body_too_large" || e.Import == nil {
		t.Fatalf("over the limit: %d %+v", status, e)
	}
	if rep := *e.Import; rep.Added != 1 || rep.Duplicates != 4 || rep.ThroughLine != 5 || rep.Unterminated != 1 ||
		rep.skippedLines() != "2:duplicate 3:duplicate 4:duplicate 5:duplicate 6:unterminated" || rep.Complete ||
		!strings.Contains(e.Message, "send the rest from line 6") {
		t.Fatalf("over the limit: %+v, %q", rep, e.Message)
	}

	// Shorter than its Content-Length: the connection closed after half a line. (A body cut
	// within the first 8 KiB, which fasthttp reads before the handler runs, is refused by
	// fasthttp itself: nothing is imported.)
	big := newHarness(t)
	big.createProduct(1, 100, 5)
	bigAddr := strings.TrimPrefix(serve(t, big), "http://")
	body := ""
	for i := range 1000 {
		body += fmt.Sprintf("CUTA-%05d\n", i)
	}
	status, e, _ = rawImport(t, bigAddr, "Content-Length: 20000\r\n", body+"CUTA-XX", true)
	if status != 400 || e.Code != "invalid_request" || e.Import == nil || e.Import.Added != 1000 || e.Import.ThroughLine != 1000 ||
		e.Import.skippedLines() != "1001:unterminated" {
		t.Fatalf("cut short of its Content-Length: %d %+v %+v", status, e, e.Import)
	}
	if rep := big.importCodes(1, "CUTA-XX"); rep.Added != 1 {
		t.Fatalf("the cut line was imported: %+v", rep)
	}

	// Chunked, cut between two chunks: the server cannot tell it from the end, so a last line
	// without a newline is not imported; a chunked body ending with a newline is.
	status, _, rep := rawImport(t, addr, "Transfer-Encoding: chunked\r\n", chunk("CUTB-00001\n")+chunk("CUTB-00"), true)
	if status != 200 || rep.Added != 1 || rep.Unterminated != 1 || rep.skippedLines() != "2:unterminated" || rep.ThroughLine != 1 {
		t.Fatalf("chunked, cut between chunks: %d %+v", status, rep)
	}
	status, _, rep = rawImport(t, addr, "Transfer-Encoding: chunked\r\n", chunk("CUTC-00")+chunk("001\n")+chunk(""), false)
	if status != 200 || rep.Added != 1 || rep.Unterminated != 0 || rep.ThroughLine != 1 || !rep.Complete {
		t.Fatalf("chunked, whole: %d %+v", status, rep)
	}

	// None of the cut lines was taken for a code.
	if rep := h.importCodes(1, "LIMIT", "CUTB-00"); rep.Added != 2 {
		t.Fatalf("a cut line was imported: %+v", rep)
	}
	if c := h.cardCounts(1); c[domain.CardUnsold] != 1+1+1+2 {
		t.Fatalf("pool %v", c)
	}
}
