package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
	"cardshop/application"
	"cardshop/domain"
)

// Import jobs: a console import runs in the background on the instance that received its
// file, so that its page can show the import's own progress (bytes the import has consumed),
// not only the upload's. Jobs live in this instance's memory: at most maxImportJobs, a
// finished one for importJobTTL; the import's lasting record is its audit entry (the history).
const (
	// maxImportJobs bounds the jobs an instance keeps, running and finished: a new one evicts
	// the oldest finished; when every kept job is still running a new import is refused.
	maxImportJobs = 32
	// importJobTTL is how long a finished job's page stays after the import ended.
	importJobTTL = time.Hour
	// importTimeout bounds one import's run (a gigabyte file takes minutes).
	importTimeout = time.Hour
)

// errTooManyImports refuses an import while maxImportJobs are running on this instance.
var errTooManyImports = fmt.Errorf("%w: %d imports are running on this instance", domain.ErrUnavailable, maxImportJobs)

// importJob is one code import the console runs: which product, who started it and when,
// the stored upload's size, the bytes and lines the import has consumed so far, and at the
// end its report or error.
type importJob struct {
	ID       string
	Product  domain.ProductID
	Operator domain.OperatorName
	Started  time.Time
	Total    int64 // bytes of the stored upload

	read  atomic.Int64 // bytes the import has read
	lines atomic.Int64 // newlines among them

	mu     sync.Mutex
	done   bool
	ended  time.Time
	report application.ImportReport
	err    error
}

// importState is a job as its page and its progress answer show it, read at one moment.
type importState struct {
	ID       string
	Product  domain.ProductID
	Operator domain.OperatorName
	Started  time.Time
	Total    int64
	Read     int64
	Lines    int64
	Done     bool
	Ended    time.Time
	Report   application.ImportReport
	Error    string // what stopped the import, in the operator's language (never internal text): set by the page
	err      error
}

func (j *importJob) state() importState {
	s := importState{ID: j.ID, Product: j.Product, Operator: j.Operator, Started: j.Started, Total: j.Total,
		Read: j.read.Load(), Lines: j.lines.Load()}
	j.mu.Lock()
	defer j.mu.Unlock()
	s.Done, s.Ended, s.Report = j.done, j.ended, j.report
	s.err = j.err
	return s
}

func (j *importJob) finish(rep application.ImportReport, err error, at time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.done, j.ended, j.report, j.err = true, at, rep, err
}

func (j *importJob) finished() (bool, time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done, j.ended
}

// countingReader counts what the import consumes of the stored upload: its job's progress.
type countingReader struct {
	r   io.Reader
	job *importJob
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.job.read.Add(int64(n))
	c.job.lines.Add(int64(bytes.Count(p[:n], []byte{'\n'})))
	return n, err
}

// importJobs are this instance's import jobs by id.
type importJobs struct {
	clock domain.Clock
	mu    sync.Mutex
	jobs  map[string]*importJob
}

func newImportJobs(clock domain.Clock) *importJobs {
	return &importJobs{clock: clock, jobs: map[string]*importJob{}}
}

// add keeps a new job: expired jobs are forgotten first, then, when maxImportJobs are kept,
// the oldest finished one. errTooManyImports when all of them are still running.
func (js *importJobs) add(j *importJob) error {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.prune()
	if len(js.jobs) >= maxImportJobs {
		var oldest *importJob
		var oldestEnd time.Time
		for _, o := range js.jobs {
			if done, end := o.finished(); done && (oldest == nil || end.Before(oldestEnd)) {
				oldest, oldestEnd = o, end
			}
		}
		if oldest == nil {
			return errTooManyImports
		}
		delete(js.jobs, oldest.ID)
	}
	js.jobs[j.ID] = j
	return nil
}

// get finds a kept job of the product (nil: unknown here, another product's, or expired).
func (js *importJobs) get(id string, p domain.ProductID) *importJob {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.prune()
	if j := js.jobs[id]; j != nil && j.Product == p {
		return j
	}
	return nil
}

// running lists the product's jobs still running, oldest first.
func (js *importJobs) running(p domain.ProductID) []importState {
	js.mu.Lock()
	defer js.mu.Unlock()
	var out []importState
	for _, j := range js.jobs {
		if done, _ := j.finished(); !done && j.Product == p {
			out = append(out, j.state())
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Started.Before(out[b].Started) })
	return out
}

// prune forgets the jobs that finished more than importJobTTL ago. js.mu is held.
func (js *importJobs) prune() {
	now := js.clock.Now()
	for id, j := range js.jobs {
		if done, end := j.finished(); done && now.Sub(end) > importJobTTL {
			delete(js.jobs, id)
		}
	}
}

func newJobID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// startImport stores the uploaded file (operator) in a temporary file, bounded by the API's
// import limit, and starts the import of it in the background as a job of this instance; it
// answers with a redirect to the job's page. An upload refused (no file, over the limit, cut)
// imports nothing and is recorded as product.import with its error; a started import is
// recorded when it ends, with its counts (webkit.ImportAudit), as the API records one.
func (k *console) startImport(c *fiber.Ctx) error {
	id, err := productID(c)
	if err == nil {
		_, err = k.catalogue.Product(c.UserContext(), id)
	}
	if err != nil {
		k.record(c, "product.import", nil, err)
		return k.fail(c, err)
	}
	f, n, err := k.storeUpload(c)
	if err != nil {
		k.record(c, "product.import", nil, err)
		status, msg := k.explain(c, err)
		if errors.Is(err, webkit.ErrBodyTooLarge) {
			msg = k.trN(c, "console.import.too_large", int(k.cfg.MaxImportBytes))
		}
		if status >= 500 {
			return k.fail(c, err)
		}
		return k.codesPage(c, status, msg)
	}
	job := &importJob{ID: newJobID(), Product: id, Operator: identityOf(c).Name, Started: k.clock.Now(), Total: n}
	if err := k.jobs.add(job); err != nil {
		discard(f)
		k.record(c, "product.import", nil, err)
		return k.errorPage(c, fiber.StatusServiceUnavailable,
			k.trN(c, "console.import.too_many", maxImportJobs))
	}
	entry := k.entry(c, "product.import", "", nil)
	ctx := context.WithoutCancel(c.UserContext())
	go k.runImport(ctx, job, f, entry)
	return c.Redirect(fmt.Sprintf("/console/products/%d/imports/%s", id, job.ID), fiber.StatusSeeOther)
}

// storeUpload copies the form's file into a new temporary file (mode 0600, removed when the
// import ends: it holds codes), positioned at its start, with its size. Errors: a missing
// file, one over MaxImportBytes (webkit.ErrBodyTooLarge), or one cut short — nothing kept.
func (k *console) storeUpload(c *fiber.Ctx) (*os.File, int64, error) {
	part := upload(c)
	if part == nil {
		return nil, 0, invalid("file", "console.err.choose_file")
	}
	if n := c.Request().Header.ContentLength(); n > 0 && int64(n) > k.cfg.MaxImportBytes+maxFormBytes {
		return nil, 0, webkit.ErrBodyTooLarge
	}
	f, err := os.CreateTemp("", "cardshop-import-*")
	if err != nil {
		return nil, 0, fmt.Errorf("store the upload: %w: %w", domain.ErrUnavailable, err)
	}
	n, err := io.Copy(f, io.LimitReader(part, k.cfg.MaxImportBytes+1))
	switch {
	case err != nil:
		err = invalid("file", "console.err.file_cut")
	case n > k.cfg.MaxImportBytes:
		err = webkit.ErrBodyTooLarge
	}
	if err == nil {
		if _, serr := f.Seek(0, io.SeekStart); serr != nil {
			err = fmt.Errorf("store the upload: %w: %w", domain.ErrUnavailable, serr)
		}
	}
	if err != nil {
		discard(f)
		return nil, 0, err
	}
	return f, n, nil
}

// discard closes and removes a stored upload.
func discard(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// runImport imports the stored upload through the import use case, counting what it
// consumes, then removes the file, finishes the job and records the audit entry.
func (k *console) runImport(ctx context.Context, job *importJob, f *os.File, e domain.AuditEntry) {
	ctx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	rep, err := k.catalogue.ImportCodes(ctx, job.Product, countingReader{r: f, job: job})
	discard(f)
	if err != nil {
		k.log.ErrorContext(ctx, "console: import stopped", "product", job.Product, "job", job.ID, "through", rep.Through, "err", err)
	}
	params, _ := json.Marshal(webkit.NewImportAudit(rep, job.read.Load()).Fields()) // numbers always encode; keys sorted, as the API records them
	e.Params, e.Result = string(params), webkit.AuditResult(fiber.StatusOK, err)
	k.appendEntry(ctx, e)
	job.finish(rep, err, k.clock.Now())
}

// jobOf is the route's job, nil when this instance does not have it.
func (k *console) jobOf(c *fiber.Ctx) (domain.ProductID, *importJob, error) {
	id, err := productID(c)
	if err != nil {
		return 0, nil, err
	}
	return id, k.jobs.get(c.Params("job"), id), nil
}

type importJobData struct {
	Product domain.Product
	Job     importState
	Known   bool
	Percent int64
	Resume  int // after an import that stopped: the first line not accounted for
}

// importJob shows an import job: its progress while it runs (a progress bar that
// static/import.js updates; without script the page refreshes itself), its result when it
// has ended — the counts and every line not imported with its reason. A job this instance
// does not have (another instance's, or forgotten) is a page saying so.
func (k *console) importJob(c *fiber.Ctx) error {
	id, job, err := k.jobOf(c)
	if err != nil {
		return k.fail(c, err)
	}
	p, err := k.catalogue.Product(c.UserContext(), id)
	if err != nil {
		return k.fail(c, err)
	}
	d := importJobData{Product: p}
	if job == nil {
		return k.render(c, fiber.StatusNotFound, "importjob", view{Title: k.tr(c, "console.import.title", "Name", p.Name()), Data: d})
	}
	d.Job, d.Known = job.state(), true
	if d.Job.err != nil {
		d.Job.Error = k.errText(k.lang(c), d.Job.err)
	}
	d.Resume = d.Job.Report.Through + 1
	if d.Job.Total > 0 {
		d.Percent = d.Job.Read * 100 / d.Job.Total
	}
	return k.render(c, fiber.StatusOK, "importjob", view{Title: k.tr(c, "console.import.title", "Name", p.Name()), Data: d})
}

// importProgress answers a job's progress as JSON for static/import.js (404 when unknown).
func (k *console) importProgress(c *fiber.Ctx) error {
	_, job, err := k.jobOf(c)
	if err != nil || job == nil {
		return c.Status(fiber.StatusNotFound).JSON(fiber.Map{"error": "no such import on this instance"})
	}
	s := job.state()
	return c.JSON(fiber.Map{"done": s.Done, "read": s.Read, "total": s.Total, "lines": s.Lines})
}
