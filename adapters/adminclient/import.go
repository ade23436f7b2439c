package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Upload is a body of codes for ImportCodes: one code per line, or CSV with the code first.
type Upload struct {
	Codes io.Reader
	// Size is the body's length in bytes, or -1 when unknown. Unless Chunked, it is sent as the
	// Content-Length (the service then refuses a body over its limit before reading it).
	Size int64
	// Chunked sends the body chunked, every chunk ending a line, with a final newline added if
	// the body lacks one (a stream such as standard input); Size then only feeds Progress.
	Chunked bool
	// CSV labels the upload text/csv instead of text/plain. The service reads both forms the
	// same way.
	CSV bool
	// Every is how often Progress is called while the body is sent; 0: never, not even at the
	// end.
	Every time.Duration
	// Progress receives how far the upload is, from another goroutine, every Every, and once
	// more with the service's status when it has answered.
	Progress func(Progress)
}

// Progress is how far an upload is.
type Progress struct {
	Sent    int64 // bytes sent
	Size    int64 // the upload's size, or -1 when unknown
	Elapsed time.Duration
	Status  int // the service's answer; 0 while sending
}

// String describes the bytes sent, of how many when the size is known, in how long and how fast.
func (p Progress) String() string {
	s := mib(p.Sent)
	if p.Size > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", mib(p.Size), p.Sent*100/p.Size)
	}
	s += " in " + p.Elapsed.Round(100*time.Millisecond).String()
	if p.Elapsed >= time.Second/2 {
		s += fmt.Sprintf(", %s/s", mib(int64(float64(p.Sent)/p.Elapsed.Seconds())))
	}
	return s
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// SendError is an upload cut short: the request failed after Sent. What the service had read
// is imported; sending the whole body again is safe (those codes come back as duplicates).
type SendError struct {
	Sent Progress
	Err  error
}

// Error names how much was sent and why it stopped.
func (e *SendError) Error() string { return fmt.Sprintf("after %s: %v", e.Sent, e.Err) }

// Unwrap returns the request's error.
func (e *SendError) Unwrap() error { return e.Err }

// ImportReport is the service's answer to an import (ImportReport in openapi.json).
type ImportReport struct {
	Added        int `json:"added"`
	Uses         int `json:"uses"` // the units of stock the added codes brought (Added × the product's code uses)
	Duplicates   int `json:"duplicates"`
	InPool       int `json:"in_pool"`
	Invalid      int `json:"invalid"`
	Comments     int `json:"comments"`
	Headers      int `json:"headers"`
	Unterminated int `json:"unterminated"`
	Skipped      []struct {
		Line   int    `json:"line"`
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	} `json:"skipped"`
	Truncated bool `json:"truncated"`
	Through   int  `json:"through_line"`
	Filled    int  `json:"filled"` // waiting orders the new codes filled
}

// ImportCodes streams up into product's pool (POST /admin/products/{id}/codes) and returns the
// service's report. The body is never held in memory: it is read as it is sent. Errors are a
// *ServiceError for an answer other than 200 (its Import set when the import stopped
// half-way), a *SendError when the request failed while sending, or another error.
func (c *Client) ImportCodes(ctx context.Context, product int64, up Upload) (ImportReport, error) {
	// Ask for the product first: a refusal (unknown product, wrong token) answered while a
	// large upload is still being sent resets the connection, and its JSON would be lost.
	productURL := fmt.Sprintf("%s/admin/products/%d", c.base, product)
	if _, err := c.adminCall(ctx, &http.Client{Timeout: 30 * time.Second}, http.MethodGet, productURL); err != nil {
		return ImportReport{}, err
	}
	src := up.Codes
	if up.Chunked {
		src = newLineChunks(src) // sent chunked: every chunk ends a line
	}
	body := &countingReader{r: src}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, productURL+"/codes", body)
	if err != nil {
		return ImportReport{}, err
	}
	if !up.Chunked {
		req.ContentLength = up.Size // lets the service refuse a file over its limit before reading it
		if up.Size == 0 {
			req.Body = http.NoBody
		}
	}
	contentType := "text/plain; charset=utf-8"
	if up.CSV {
		contentType = "text/csv; charset=utf-8"
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+c.adminToken)

	start := time.Now()
	sent := func(status int) Progress {
		return Progress{Sent: body.n.Load(), Size: up.Size, Elapsed: time.Since(start), Status: status}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if up.Every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(up.Every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					up.Progress(sent(0))
				}
			}
		}()
	}
	// No client timeout: the service answers once it has imported the whole upload.
	resp, err := (&http.Client{}).Do(req)
	close(done)
	wg.Wait() // the progress goroutine no longer calls Progress
	if err != nil {
		return ImportReport{}, &SendError{Sent: sent(0), Err: err}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return ImportReport{}, fmt.Errorf("reading the answer: %w", err)
	}
	if up.Every > 0 {
		up.Progress(sent(resp.StatusCode))
	}
	if resp.StatusCode != http.StatusOK {
		// An import that stopped half-way says what it did before the error.
		var failed struct {
			Import *ImportReport `json:"import"`
		}
		serr := newServiceError(resp.StatusCode, answer)
		if json.Unmarshal(answer, &failed) == nil && failed.Import != nil {
			serr.Import = failed.Import
		}
		return ImportReport{}, serr
	}
	var rep ImportReport
	if err := json.Unmarshal(answer, &rep); err != nil {
		return ImportReport{}, fmt.Errorf("unreadable answer %q: %w", answer, err)
	}
	return rep, nil
}

// lineChunks passes a stream on in reads that end at a line end, and ends it with a newline.
// The HTTP client sends each read of a body of unknown size as one chunk, and the service
// cannot tell a connection cut between two chunks from the body's end: so every chunk ends a
// line, and a last line is never cut (the service does not import a last line without a
// newline from a chunked body). Only a line longer than a whole read — never a valid code —
// is split.
type lineChunks struct {
	r   io.Reader
	buf []byte // read and not passed on yet
	eof bool
}

func newLineChunks(r io.Reader) *lineChunks { return &lineChunks{r: r, buf: make([]byte, 0, 64<<10)} }

func (l *lineChunks) Read(p []byte) (int, error) {
	for {
		if i := bytes.LastIndexByte(l.buf[:min(len(l.buf), len(p))], '\n'); i >= 0 {
			return l.pass(p, i+1), nil
		}
		if len(l.buf) >= len(p) || len(l.buf) == cap(l.buf) {
			return l.pass(p, min(len(l.buf), len(p))), nil
		}
		if l.eof {
			if len(l.buf) == 0 {
				return 0, io.EOF
			}
			n := copy(p, l.buf) // less than p holds, without a newline: add one
			p[n] = '\n'
			l.buf = l.buf[:0]
			return n + 1, nil
		}
		n, err := l.r.Read(l.buf[len(l.buf):cap(l.buf)])
		l.buf = l.buf[:len(l.buf)+n]
		if errors.Is(err, io.EOF) {
			l.eof = true
		} else if err != nil {
			return 0, err
		}
	}
}

// pass copies the first n buffered bytes to p and drops them from the buffer.
func (l *lineChunks) pass(p []byte, n int) int {
	copy(p, l.buf[:n])
	l.buf = append(l.buf[:0], l.buf[n:]...)
	return n
}

// countingReader counts the bytes read through it; the progress goroutine reads the count.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
