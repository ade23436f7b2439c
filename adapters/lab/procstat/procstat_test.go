package procstat

import "testing"

func TestParseCPU(t *testing.T) {
	// A command name with a space and a ')' of its own: fields are counted from the last ')'.
	line := []byte("4242 (card shop) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 9 0 100 1000 200\n")
	got, err := ParseCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if got != 2.87 {
		t.Fatalf("utime 250 + stime 37 ticks = %v s, want 2.87", got)
	}
	if _, err := ParseCPU([]byte("4242 (short) S 1 2")); err == nil {
		t.Fatal("a truncated stat line was accepted")
	}
}
