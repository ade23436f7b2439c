package main

import "testing"

// -ab-var takes a service setting and two different values; anything else is refused.
func TestABSetting(t *testing.T) {
	var v abSetting
	if err := v.Set("CARDSHOP_AMQP_UNCONFIRMED_CLOSES=0,4096"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if v != (abSetting{name: "CARDSHOP_AMQP_UNCONFIRMED_CLOSES", a: "0", b: "4096"}) || v.String() != "CARDSHOP_AMQP_UNCONFIRMED_CLOSES=0,4096" {
		t.Fatalf("parsed %+v (%s)", v, v.String())
	}
	for _, bad := range []string{"", "CARDSHOP_LEDGER_BATCH", "CARDSHOP_LEDGER_BATCH=on", "CARDSHOP_LEDGER_BATCH=on,on",
		"LEDGER_BATCH=off,on", "CARDSHOP_LEDGER_BATCH=,on", "CARDSHOP_LEDGER_BATCH=off,", "CARDSHOP_X=a,b,c"} {
		w := abSetting{name: "kept"}
		if err := w.Set(bad); err == nil || w.name != "kept" {
			t.Errorf("Set(%q) = %v, %+v; want an error and nothing changed", bad, err, w)
		}
	}
}
