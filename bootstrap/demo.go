package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.uber.org/fx"

	"cardshop/application"
	"cardshop/domain"
)

// demoProduct is one product of the demo shop: what `make run` sells so that a newcomer can buy
// a code at once, without creating a product first.
type demoProduct struct {
	product application.NewProduct
	prefix  string // its codes: prefix-0001 …
	codes   int
}

// demoProducts are the demo shop's products: two on sale (one with quantity tiers and a
// per-buyer limit, one showing a stock level) and one whose sale starts two minutes after the
// service, to see the countdown turn into the order form. Their descriptions are what a shop
// in China would write (in Chinese: a description has one language), and say the codes are
// made up.
func demoProducts(now time.Time) []demoProduct {
	return []demoProduct{
		{product: application.NewProduct{ID: 1, Name: "Steam 充值卡 50 元 · Steam Wallet 50", Price: 5000, MaxPerOrder: 5,
			Description: "充值到 Steam 钱包，可用于购买游戏和游戏内物品。\n" +
				"兑换：Steam 客户端 → 游戏 → 兑换 Steam 钱包充值码。\n\n" +
				"一次买 3 张及以上每张 48 元。\n\n演示商品：卡密为虚构，不能兑换。",
			Tiers: []domain.PriceTier{{MinQty: 3, UnitPrice: 4800}}, Sale: domain.SaleRules{BuyerLimit: 10}},
			prefix: "DEMO-STEAM", codes: 50},
		{product: application.NewProduct{ID: 2, Name: "App Store 礼品卡 100 元 · App Store Gift Card 100", Price: 10000,
			Description: "适用于中国区 Apple ID，可购买 App、游戏、音乐和 iCloud 等服务。\n" +
				"兑换：App Store → 头像 → 兑换充值卡或代码。\n\n演示商品：卡密为虚构，不能兑换。",
			MaxPerOrder: 2, StockDisplay: domain.StockLevel}, prefix: "DEMO-APPLE", codes: 8},
		{product: application.NewProduct{ID: 3, Name: "限量首发 激活码 · Launch Day Licence Key", Price: 9900, MaxPerOrder: 1,
			Description: "首发限量，每个邮箱限购 1 件。\n" +
				"开售前页面显示倒计时，到点自动出现购买表单，无需刷新。\n\n演示商品：激活码为虚构，不能激活。",
			Sale: domain.SaleRules{StartsAt: now.Add(2 * time.Minute).Truncate(time.Second), BuyerLimit: 1}},
			prefix: "DEMO-LAUNCH", codes: 20},
	}
}

// seedDemo fills the shop with the demo products and their codes when the service starts, on the
// memory adapters only (CARDSHOP_DEMO: LoadConfig refuses it with the real ones, whose database
// is a shop's own). The codes are made up and sell nothing real.
func seedDemo(lc fx.Lifecycle, cfg Config, cat *application.Catalogue, clock domain.Clock, log *slog.Logger) {
	if !cfg.Demo {
		return
	}
	lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
		for _, d := range demoProducts(clock.Now()) {
			if _, err := cat.CreateProduct(ctx, d.product); err != nil {
				return fmt.Errorf("demo product %d: %w", d.product.ID, err)
			}
			var b strings.Builder
			for i := 1; i <= d.codes; i++ {
				fmt.Fprintf(&b, "%s-%04d\n", d.prefix, i)
			}
			if _, err := cat.ImportCodes(ctx, d.product.ID, strings.NewReader(b.String())); err != nil {
				return fmt.Errorf("demo codes of product %d: %w", d.product.ID, err)
			}
		}
		log.Info("demo shop: 3 products with made-up codes (CARDSHOP_DEMO)")
		return nil
	}})
}
