package webhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkNotify is the cost of one signed delivery to a storefront on loopback that answers
// at once: the sender's own overhead (encode, sign, one keep-alive HTTP round trip).
func BenchmarkNotify(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	c := newClient(b, srv.URL, nil, 0)
	n := notification()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.Notify(b.Context(), n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
