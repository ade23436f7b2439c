package application

import "testing"

func TestIDRanges(t *testing.T) {
	for _, c := range []struct {
		ids  []int64
		want string
	}{
		{nil, ""},
		{[]int64{7}, "7"},
		{[]int64{9, 7, 8}, "7-9"},
		{[]int64{1, 2, 4, 6, 7, 8, 10}, "1-2,4,6-8,10"},
		{[]int64{3, 3, 4}, "3-4"},
	} {
		in := append([]int64(nil), c.ids...)
		if got := idRanges(c.ids); got != c.want {
			t.Errorf("idRanges(%v) = %q, want %q", c.ids, got, c.want)
		}
		for i := range in {
			if in[i] != c.ids[i] {
				t.Fatalf("idRanges sorted its caller's slice: %v", c.ids)
			}
		}
	}
}
