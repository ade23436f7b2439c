package bootstrap_test

import (
	"io"
	"strings"
	"testing"

	"cardshop/bootstrap"
)

// TestDemoShopSellsAtOnce: with CARDSHOP_DEMO (make run) the shop starts with its three demo
// products and their codes and descriptions, listed by the catalogue and the shop's page; the README's
// walk-through still creates its own product 1001 beside them. The real adapters refuse it.
func TestDemoShopSellsAtOnce(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_DEV_PAYMENTS=true", "CARDSHOP_DEMO=true"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	c := runService(t, cfg, io.Discard)
	var list struct {
		Products []struct {
			ID          int64  `json:"id"`
			Name        string `json:"name"`
			Description string `json:"description"`
			Status      string `json:"status"`
			Stock       *int64 `json:"stock"`
		} `json:"products"`
	}
	c.want(200, "GET", "/api/products", "", "", &list)
	if len(list.Products) != 3 {
		t.Fatalf("the demo shop lists %d products, want 3: %+v", len(list.Products), list.Products)
	}
	want := map[int64]string{1: "on_sale", 2: "on_sale", 3: "upcoming"}
	for _, p := range list.Products {
		if want[p.ID] != p.Status {
			t.Errorf("demo product %d (%s): status %s, want %s", p.ID, p.Name, p.Status, want[p.ID])
		}
		if !strings.Contains(p.Description, "演示商品") {
			t.Errorf("demo product %d: description %q does not say it is a demo", p.ID, p.Description)
		}
	}
	if list.Products[0].Stock == nil || *list.Products[0].Stock != 50 {
		t.Errorf("demo product 1's stock: %v, want 50", list.Products[0].Stock)
	}
	_, page := c.do("GET", "/", "", "", "Accept-Language", "zh-CN")
	if !strings.Contains(string(page), "Steam 充值卡 50 元") || !strings.Contains(string(page), "充值到 Steam 钱包") {
		t.Errorf("the shop's page does not show the demo products: %s", page)
	}
	c.want(201, "POST", "/admin/products", adminToken, `{"id":1001,"name":"Steam 50","price":5000,"max_per_order":5}`, nil)

	if _, err := bootstrap.LoadConfig(env("CARDSHOP_DEMO=true", "CARDSHOP_ADAPTERS=real")); err == nil ||
		!strings.Contains(err.Error(), "CARDSHOP_DEMO") {
		t.Fatalf("the real adapters with CARDSHOP_DEMO: %v", err)
	}
}
