package lua_test

import (
	"strings"
	"testing"

	"cardshop/lua"
)

// ratelimit.lua opens with the same contract as the gate's scripts (embed_test.go).
func TestRateLimitScriptOpensWithItsContract(t *testing.T) {
	const name = "ratelimit.lua"
	if !strings.HasPrefix(lua.RateLimit, "-- "+name+":") {
		t.Fatalf("%s does not open with a comment naming it", name)
	}
	var header strings.Builder
	for line := range strings.Lines(lua.RateLimit) {
		if !strings.HasPrefix(line, "--") {
			break
		}
		header.WriteString(line)
	}
	for _, want := range []string{"KEYS[1]", "ARGV[1]", "ARGV[2]", "Returns", "Why atomic", "TIME"} {
		if !strings.Contains(header.String(), want) {
			t.Errorf("%s's opening comment does not mention %q", name, want)
		}
	}
}
