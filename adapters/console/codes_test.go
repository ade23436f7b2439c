package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/console"
	"cardshop/adapters/httpapi"
	"cardshop/adapters/ratelimit"
	"cardshop/domain"
)

// importHolds holds a harness's ledger transactions while its channel is open: an import
// then stays running (its first batch waits), so a test can see the job page mid-import.
var importHolds sync.Map // *outageLedger → chan struct{}

// importFailures makes a harness's ledger transactions fail, as a database gone away.
var importFailures sync.Map // *outageLedger → struct{}

func (l *outageLedger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	if ch, ok := importHolds.Load(l); ok {
		<-ch.(chan struct{})
	}
	if _, ok := importFailures.Load(l); ok {
		return fmt.Errorf("transaction: %w", domain.ErrUnavailable)
	}
	return l.Ledger.Atomically(ctx, fn)
}

// hold makes the harness's transactions wait until the returned release is called.
func (h *harness) hold() (release func()) {
	ch := make(chan struct{})
	importHolds.Store(h.ledger, ch)
	var once sync.Once
	release = func() {
		once.Do(func() {
			importHolds.Delete(h.ledger)
			close(ch)
		})
	}
	h.t.Cleanup(release)
	return release
}

// uploadForm is a multipart import form: csrf (when not empty) first, then the file, then
// extra fields after it.
func uploadForm(t testing.TB, csrf string, name, content string, after ...string) (io.Reader, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if csrf != "" {
		if err := w.WriteField("csrf", csrf); err != nil {
			t.Fatal(err)
		}
	}
	f, err := w.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, content); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(after); i += 2 {
		if err := w.WriteField(after[i], after[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &b, w.FormDataContentType()
}

// upload posts a file of codes to the product's import form with the session's CSRF token.
func (b *browser) upload(p domain.ProductID, name, content string) resp {
	b.h.t.Helper()
	body, ct := uploadForm(b.h.t, b.csrf, name, content)
	return b.h.do("POST", "/console/products/"+itoa(int64(p))+"/codes", body, "Content-Type", ct, "Cookie", b.cookie)
}

type progressJSON struct {
	Done  bool  `json:"done"`
	Read  int64 `json:"read"`
	Total int64 `json:"total"`
	Lines int64 `json:"lines"`
}

func (b *browser) progress(job string) progressJSON {
	b.h.t.Helper()
	r := b.get(job + "/progress")
	wantStatus(b.h.t, r, 200)
	var p progressJSON
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		b.h.t.Fatalf("progress: %v: %s", err, r.body)
	}
	return p
}

// waitDone polls the job's progress until its import has ended.
func (b *browser) waitDone(job string) progressJSON {
	b.h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := b.progress(job)
		if p.Done {
			return p
		}
		if time.Now().After(deadline) {
			b.h.t.Fatalf("import %s still running: %+v", job, p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var jobPath = regexp.MustCompile(`^/console/products/\d+/imports/[0-9a-f]{32}$`)

// startedJob checks the upload was answered with a redirect to its job's page, and returns it.
func startedJob(t testing.TB, r resp) string {
	t.Helper()
	loc := r.header.Get("Location")
	if r.status != fiber.StatusSeeOther || !jobPath.MatchString(loc) {
		t.Fatalf("upload: %s (Location %q), want a redirect to the job", r, loc)
	}
	return loc
}

func wantNoCode(t testing.TB, where, body string, codes ...string) {
	t.Helper()
	for _, c := range codes {
		if strings.Contains(body, c) {
			t.Fatalf("%s shows the code %q", where, c)
		}
	}
}

func TestCodesScreenShowsCountsPerStatusAndTheGate(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	codes := []string{"SCREEN-CODE-A1", "SCREEN-CODE-B2", "SCREEN-CODE-C3"}
	h.paidOrder(p, codes, 2)
	path := "/console/products/" + itoa(int64(p.ID()))
	viewer := h.login(h.operator("vera", domain.RoleViewer))

	if r := viewer.get(path); !strings.Contains(r.body, `href="`+path+`/codes"`) {
		t.Fatalf("product page has no codes link: %s", r.body)
	}
	r := viewer.get(path + "/codes")
	wantStatus(t, r, 200)
	for status, n := range map[string]string{"UNSOLD": "1", "SOLD": "2", "RECYCLED": "0", "VOID": "0"} {
		if !strings.Contains(r.body, `<td data-label="Status">`+status+`</td><td class="num" data-label="Codes">`+n+`</td>`) {
			t.Errorf("%s=%s not shown: %s", status, n, r.body)
		}
	}
	if !strings.Contains(r.body, "<dt>Stock left (gate)</dt><dd>1</dd>") || !strings.Contains(r.body, "<dt>Held by orders (gate)</dt><dd>2</dd>") {
		t.Errorf("gate numbers not shown: %s", r.body)
	}
	// The import the order's codes came through (use case, no operator) is not in the audit
	// log; a viewer gets no import form.
	if strings.Contains(r.body, `enctype="multipart/form-data"`) || !strings.Contains(r.body, "No imports yet.") {
		t.Errorf("viewer's codes page: %s", r.body)
	}
	wantNoCode(t, "codes page", r.body, codes...)
	wantStatus(t, viewer.get("/console/products/999/codes"), 404)
}

func TestConsoleImportRunsAsAJobAndShowsEveryRejectedLine(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	p := h.product("Gift card", 1999)
	other := h.product("Other", 500)
	if _, err := h.shop.Catalogue.ImportCodes(ctx, other.ID(), strings.NewReader("OTHER-CODE-0001\n")); err != nil {
		t.Fatal(err)
	}
	oper := h.login(h.operator("otto", domain.RoleOperator))
	file := "code\nJOB-CODE-0001\n# a comment\nJOB-CODE-0002\nJOB-CODE-0001\nx\nOTHER-CODE-0001\nJOB-CODE-0003"
	job := startedJob(t, oper.upload(p.ID(), "codes.csv", file))

	p0 := oper.waitDone(job)
	if p0.Read != int64(len(file)) || p0.Total != int64(len(file)) || p0.Lines != 7 {
		t.Errorf("progress at the end %+v, want every byte of %d read, 7 newlines", p0, len(file))
	}
	r := oper.get(job)
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "Imported: 3 codes added, 5 lines not imported.") || strings.Contains(r.body, "<progress") {
		t.Fatalf("job page after the import: %s", r.body)
	}
	// The same page in Chinese: the counts and the reasons in the operator's language.
	zh := oper.h.do("GET", job, nil, "Cookie", oper.cookie, "Accept-Language", "zh-CN")
	for _, want := range []string{"导入完成：新增 3 个卡密，5 行未导入。", ">重复<", ">表头<", ">注释<", ">属于其他商品<", ">无效<"} {
		if !strings.Contains(zh.body, want) {
			t.Errorf("the job page in Chinese has no %q: %s", want, zh.body)
		}
	}
	for _, row := range []string{"1</td><td data-label=\"Reason\">header", "3</td><td data-label=\"Reason\">comment",
		"5</td><td data-label=\"Reason\">duplicate", "6</td><td data-label=\"Reason\">invalid</td><td data-label=\"Detail\">must be 4 to 128 characters",
		"7</td><td data-label=\"Reason\">in_pool"} {
		if !strings.Contains(r.body, `<td class="num" data-label="Line">`+row) {
			t.Errorf("rejected line %q not shown: %s", row, r.body)
		}
	}
	all := []string{"JOB-CODE-0001", "JOB-CODE-0002", "JOB-CODE-0003", "OTHER-CODE-0001"}
	wantNoCode(t, "job page", r.body, all...)
	counts, err := h.shop.Catalogue.CardCounts(ctx, p.ID())
	if err != nil || counts[domain.CardUnsold] != 3 {
		t.Fatalf("pool after the import: %v %v", counts, err)
	}

	// The import is in the audit log with its counts (never a code), and in the history.
	e := h.audit()[0]
	if e.Operator != "otto" || e.Action != "product.import" || e.Target != "product "+itoa(int64(p.ID())) || e.Result != "200" ||
		e.Params != `{"added":3,"bytes":`+itoa(int64(len(file)))+`,"comments":1,"duplicates":1,"headers":1,"in_pool":1,"invalid":1,"through":8,"unterminated":0}` {
		t.Fatalf("audit entry %+v", e)
	}
	codesPage := oper.get("/console/products/" + itoa(int64(p.ID())) + "/codes")
	if !strings.Contains(codesPage.body, `<td data-label="Operator">otto (operator)</td><td data-label="Result">200</td>`+"\n"+
		`<td class="num" data-label="Added">3</td><td class="num" data-label="Not imported">5</td>`) {
		t.Fatalf("history does not show the import: %s", codesPage.body)
	}
	// An import through the API is in the history too; the other product's is not.
	wantStatus(t, h.do("POST", "/admin/products/"+itoa(int64(p.ID()))+"/codes", strings.NewReader("API-CODE-0001\n"),
		"Authorization", "Bearer "+adminToken), 200)
	wantStatus(t, h.do("POST", "/admin/products/"+itoa(int64(other.ID()))+"/codes", strings.NewReader("API-CODE-0002\n"),
		"Authorization", "Bearer "+adminToken), 200)
	codesPage = oper.get("/console/products/" + itoa(int64(p.ID())) + "/codes")
	if n := strings.Count(codesPage.body, `data-label="Added"`); n != 2 || !strings.Contains(codesPage.body, "admin-token (admin)") {
		t.Fatalf("history shows %d imports, want 2 (the console's and the API's): %s", n, codesPage.body)
	}
	wantNoCode(t, "codes page", codesPage.body, append(all, "API-CODE-0001", "API-CODE-0002")...)
	wantNoCode(t, "audit page", oper.get("/console/audit").body, append(all, "API-CODE-0001")...)
}

func TestImportJobPageWhileRunningAndAfterItIsForgotten(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	release := h.hold()
	file := "HOLD-CODE-0001\nHOLD-CODE-0002\n"
	job := startedJob(t, oper.upload(p.ID(), "codes.txt", file))

	// Running: a progress bar the script moves, a refresh without script, a reload link.
	r := oper.get(job)
	wantStatus(t, r, 200)
	for _, want := range []string{`<progress id="import-progress" max="30"`, `data-progress="` + job + `/progress"`,
		`<script src="/console/static/import.js" defer></script>`, `<noscript><meta http-equiv="refresh" content="2"></noscript>`,
		`<a href="` + job + `">Reload</a>`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("running job page lacks %q: %s", want, r.body)
		}
	}
	if pr := oper.progress(job); pr.Done || pr.Total != 30 {
		t.Errorf("progress while held: %+v", pr)
	}
	codes := oper.get("/console/products/" + itoa(int64(p.ID())) + "/codes")
	if !strings.Contains(codes.body, `<a href="`+job+`">started`) {
		t.Errorf("codes page does not list the running import: %s", codes.body)
	}
	js := h.do("GET", "/console/static/import.js", nil)
	wantStatus(t, js, 200)
	if !strings.Contains(js.body, "import-progress") {
		t.Fatalf("import.js: %s", js.body)
	}
	release()
	oper.waitDone(job)
	if r := oper.get(job); strings.Contains(r.body, "<progress") || strings.Contains(r.body, "import.js") || strings.Contains(r.body, "refresh") {
		t.Fatalf("finished job page still refreshes: %s", r.body)
	}

	// Another product's path, an unknown id, or a job ended over an hour ago: a clear page.
	other := h.product("Other", 1)
	wrong := strings.Replace(job, "/products/"+itoa(int64(p.ID()))+"/", "/products/"+itoa(int64(other.ID()))+"/", 1)
	unknown := job[:len(job)-32] + strings.Repeat("0", 32)
	h.clock.Advance(61 * time.Minute)
	for _, path := range []string{wrong, unknown, job} {
		r := oper.get(path)
		wantStatus(t, r, 404)
		if !strings.Contains(r.body, "This import is not known here") {
			t.Errorf("%s: %s", path, r.body)
		}
		wantStatus(t, oper.get(path+"/progress"), 404)
	}
	wantNoCode(t, "job page", r.body, "HOLD-CODE-0001", "HOLD-CODE-0002")
}

func TestImportRefusalsChangeNothing(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	p := h.product("Gift card", 1999)
	path := "/console/products/" + itoa(int64(p.ID()))
	viewer := h.login(h.operator("vera", domain.RoleViewer))
	oper := h.login(h.operator("otto", domain.RoleOperator))
	file := "REFUSED-CODE-0001\n"

	// A viewer may not import (403, recorded), nor see a job page.
	r := viewer.upload(p.ID(), "codes.txt", file)
	wantStatus(t, r, 403)
	if e := h.audit()[0]; e.Operator != "vera" || e.Action != "product.import" || e.Result != "403 forbidden" {
		t.Fatalf("refusal's audit entry %+v", e)
	}
	wantStatus(t, viewer.get(path+"/imports/"+strings.Repeat("a", 32)), 403)
	wantStatus(t, viewer.get(path+"/imports/"+strings.Repeat("a", 32)+"/progress"), 403)

	// Without the CSRF token, with a forged one, or with it after the file (the form is read
	// up to the file only): 403, the file never read.
	for _, form := range []func() (io.Reader, string){
		func() (io.Reader, string) { return uploadForm(t, "", "codes.txt", file) },
		func() (io.Reader, string) { return uploadForm(t, "forged-token", "codes.txt", file) },
		func() (io.Reader, string) { return uploadForm(t, "", "codes.txt", file, "csrf", oper.csrf) },
	} {
		body, ct := form()
		r := h.do("POST", path+"/codes", body, "Content-Type", ct, "Cookie", oper.cookie)
		wantStatus(t, r, 403)
		if !strings.Contains(r.body, "This form has expired or was not sent from the console") {
			t.Fatalf("no csrf token: %s", r.body)
		}
	}
	// From another site, even with the token.
	body, ct := uploadForm(t, oper.csrf, "codes.txt", file)
	wantStatus(t, h.do("POST", path+"/codes", body, "Content-Type", ct, "Cookie", oper.cookie, "Origin", "https://evil.example"), 403)

	// No file chosen: the form again with the reason, recorded.
	r = oper.upload(p.ID(), "", "")
	wantStatus(t, r, 400)
	if !strings.Contains(r.body, "choose a file of codes to import") {
		t.Fatalf("no file: %s", r.body)
	}
	if e := h.audit()[0]; e.Operator != "otto" || e.Result != "400 invalid_request" {
		t.Fatalf("no file's audit entry %+v", e)
	}
	wantStatus(t, oper.upload(999, "codes.txt", file), 404)

	// Over the import limit (the API's, MaxImportBytes): 413, nothing imported.
	small := *h
	small.app = httpapi.New(httpapi.DefaultConfig(adminToken), apiServices(h.shop), h.tokens, h.clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	console.Mount(small.app, console.Config{AdminToken: adminToken, TokenSecret: tokenSecret,
		Limiter: ratelimit.NewMemory(h.clock.Now), MaxImportBytes: int64(len(file) - 1)}, consoleServices(h.shop), h.clock, nil)
	b := &browser{h: &small, cookie: oper.cookie, csrf: oper.csrf}
	r = b.upload(p.ID(), "codes.txt", file)
	wantStatus(t, r, 413)
	if !strings.Contains(r.body, "larger than the import limit") {
		t.Fatalf("too large: %s", r.body)
	}
	wantNoCode(t, "too large", r.body, "REFUSED-CODE-0001")
	if e := h.audit()[0]; e.Result != "413 body_too_large" {
		t.Fatalf("too large's audit entry %+v", e)
	}
	if counts, err := h.shop.Catalogue.CardCounts(ctx, p.ID()); err != nil || len(counts) != 0 {
		t.Fatalf("refused imports changed the pool: %v %v", counts, err)
	}
	// A form post without a file part to the import route is no upload either.
	wantStatus(t, oper.post(path+"/codes", url.Values{}), 400)
}

// TestLargeUploadStreamsInBatches: a file over the API's body limit reaches the console as a
// stream (not parsed by the server first) and imports in several batches, its progress
// counting every byte; the stored upload is removed when the import ends.
func TestLargeUploadStreamsInBatches(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	var file strings.Builder
	for i := range 5000 {
		file.WriteString("BULK-CODE-" + itoa(int64(100000+i)) + "\n")
	}
	if file.Len() <= 64<<10 {
		t.Fatalf("the file (%d bytes) is not over the body limit", file.Len())
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the upload is stored while it imports
	job := startedJob(t, oper.upload(p.ID(), "bulk.txt", file.String()))
	if pr := oper.waitDone(job); pr.Read != int64(file.Len()) || pr.Lines != 5000 {
		t.Fatalf("progress %+v, want %d bytes and 5000 lines", pr, file.Len())
	}
	// The stored upload holds codes: it is gone once the import has ended.
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Fatalf("stored uploads left after the import: %v %v", left, err)
	}
	r := oper.get(job)
	if !strings.Contains(r.body, "Imported: 5000 codes added, 0 lines not imported.") || !strings.Contains(r.body, "Every line was imported.") {
		t.Fatalf("job page: %s", r.body)
	}
	wantNoCode(t, "job page", r.body, "BULK-CODE-")
}

// TestAnImportThatStopsSaysWhereAndIsRecorded: a ledger failure mid-import ends the job with
// the error in the API's words and the line to resume from; the audit entry has the error and
// the counts of what was imported before it.
func TestAnImportThatStopsSaysWhereAndIsRecorded(t *testing.T) {
	h := newHarness(t, 0)
	p := h.product("Gift card", 1999)
	oper := h.login(h.operator("otto", domain.RoleOperator))
	importFailures.Store(h.ledger, struct{}{})
	t.Cleanup(func() { importFailures.Delete(h.ledger) })
	job := startedJob(t, oper.upload(p.ID(), "codes.txt", "FAIL-CODE-0001\nFAIL-CODE-0002\n"))
	oper.waitDone(job)
	r := oper.get(job)
	wantStatus(t, r, 200)
	if !strings.Contains(r.body, "The import stopped: a dependency is unavailable; retry shortly.") ||
		!strings.Contains(r.body, "send the rest of the file from line 1,") {
		t.Fatalf("stopped job page: %s", r.body)
	}
	wantNoCode(t, "stopped job page", r.body, "FAIL-CODE-0001", "FAIL-CODE-0002")
	if e := h.audit()[0]; e.Action != "product.import" || e.Result != "503 service_unavailable" || !strings.Contains(e.Params, `"added":0`) {
		t.Fatalf("audit entry %+v", e)
	}
}
