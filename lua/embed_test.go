package lua_test

import (
	"strings"
	"testing"

	"cardshop/lua"
)

// Every script must say, before its code, what it touches, what it takes, what it answers and
// why it has to be one atomic step.
func TestScriptsOpenWithTheirContract(t *testing.T) {
	scripts := map[string]string{"reserve.lua": lua.Reserve, "cancel.lua": lua.Cancel,
		"apply.lua": lua.Apply, "rebuild.lua": lua.Rebuild, "holds.lua": lua.Holds, "forget.lua": lua.Forget,
		"release.lua": lua.Release, "fence.lua": lua.Fence, "finish.lua": lua.Finish, "unfence.lua": lua.Unfence,
		"rules.lua": lua.Rules, "soldout.lua": lua.SoldOut}
	for name, src := range scripts {
		t.Run(name, func(t *testing.T) {
			if !strings.HasPrefix(src, "-- "+name+":") {
				t.Fatalf("%s does not open with a comment naming it", name)
			}
			var header strings.Builder
			for line := range strings.Lines(src) {
				if !strings.HasPrefix(line, "--") {
					break
				}
				header.WriteString(line)
			}
			for _, want := range []string{"KEYS[1]", "ARGV[1]", "Returns", "Why atomic"} {
				if !strings.Contains(header.String(), want) {
					t.Errorf("%s's opening comment does not mention %q", name, want)
				}
			}
		})
	}
}
