package adminclient

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// chunkRecorder keeps each write apart, as the HTTP client's chunked writer sends each one as
// a chunk.
type chunkRecorder struct{ chunks [][]byte }

func (c *chunkRecorder) Write(p []byte) (int, error) {
	c.chunks = append(c.chunks, bytes.Clone(p))
	return len(p), nil
}

// ragged returns its data in reads of random sizes, as a pipe does.
type ragged struct {
	data []byte
	rnd  *rand.Rand
}

func (r *ragged) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+r.rnd.IntN(50))], r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestLineChunksEndEveryChunkWithALine: standard input is sent in chunks that each end a line,
// whatever sizes the input is read in, and a last line without a newline gets one; only a line
// longer than the copy buffer is split.
func TestLineChunksEndEveryChunkWithALine(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var in strings.Builder
	for i := range 5000 {
		in.WriteString(strings.Repeat("C", 1+rnd.IntN(40)))
		if i%1000 == 999 {
			in.WriteString(strings.Repeat("L", 300)) // longer than the copy buffer
		}
		in.WriteByte('\n')
	}
	in.WriteString("LAST-LINE") // no newline
	for _, bufSize := range []int{256, 32 << 10} {
		rec := &chunkRecorder{}
		if _, err := io.CopyBuffer(rec, newLineChunks(&ragged{data: []byte(in.String()), rnd: rnd}), make([]byte, bufSize)); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(rec.chunks, nil); string(got) != in.String()+"\n" {
			t.Fatalf("buffer %d: sent %d bytes, want the %d of the input and a newline", bufSize, len(got), in.Len())
		}
		for i, c := range rec.chunks {
			if c[len(c)-1] != '\n' && (bufSize > 300 || len(c) != bufSize) {
				t.Fatalf("buffer %d: chunk %d of %d bytes ends inside a line: %q", bufSize, i, len(c), c[max(0, len(c)-20):])
			}
		}
	}
	rec := &chunkRecorder{}
	if n, err := io.Copy(rec, newLineChunks(strings.NewReader(""))); n != 0 || err != nil {
		t.Fatalf("empty input: %d bytes, %v", n, err)
	}
}
