package adminctl

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The usage lists exactly the commands Main runs, and each answers -h with its own usage.
// (The commands themselves are tested against a running service in bootstrap's cli_*_test.go.)
func TestUsageListsEveryCommand(t *testing.T) {
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z-]+) `).FindAllStringSubmatch(usage, -1) {
		listed = append(listed, m[1])
	}
	var known []string
	for name := range commands {
		known = append(known, name)
	}
	slices.Sort(listed)
	slices.Sort(known)
	if !slices.Equal(listed, known) {
		t.Fatalf("usage lists %v, Main runs %v", listed, known)
	}
	for _, name := range known {
		var out, errOut bytes.Buffer
		if code := Main([]string{name, "-h"}, &out, &errOut); code != 0 || out.Len() != 0 ||
			!strings.Contains(errOut.String(), "Usage: cardshopctl "+name) {
			t.Errorf("%s -h: %d %q %q", name, code, out.String(), errOut.String())
		}
	}
}

func TestMainExitCodes(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		stdout bool
	}{
		{[]string{"help"}, 0, true},
		{[]string{"-h"}, 0, true},
		{nil, 2, false},
		{[]string{"serve"}, 2, false},
		{[]string{"product-show", "-nope"}, 2, false},
	} {
		var out, errOut bytes.Buffer
		code := Main(c.args, &out, &errOut)
		if code != c.code || (out.Len() > 0) != c.stdout {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, out.String(), errOut.String())
		}
	}
}
