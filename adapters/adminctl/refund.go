package adminctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"cardshop/adapters/adminclient"
)

// refund refunds an order through the admin API and prints where its money and codes went.
func refund(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("refund", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of the service")
	order := fs.String("order", "", "order number (required)")
	void := fs.Bool("void", false, "void the codes, revealed or not")
	recycle := fs.Bool("recycle", false, "recycle the codes even if the buyer has seen them")
	reason := fs.String("reason", "", "why (recorded on the order)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: cardshopctl refund -order NO [-url URL] [-void | -recycle] [-reason TEXT]

Refunds an order through the admin API (POST /admin/orders/NO/refund; admin token from
CARDSHOP_ADMIN_TOKEN): its money through the provider that took it (the same refund number on
every try, so running it again never pays out twice), then its codes. Without -void or
-recycle, codes the buyer has seen are voided and the others recycled. The choice (and the
reason) is kept with the refund of the money: a refund the provider finishes later applies it
then, and running the command again while it is under way does not change it. Exit status: 0 when
the order is REFUNDED or its provider finishes the refund later, 1 otherwise (a refusal, a
provider that cannot be reached: run it again).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *order == "" || fs.NArg() != 0 || (*void && *recycle) {
		fs.Usage()
		return errors.New("-order is required, -void and -recycle exclude each other, and nothing else")
	}
	adminToken := os.Getenv("CARDSHOP_ADMIN_TOKEN")
	if adminToken == "" {
		return errors.New("set CARDSHOP_ADMIN_TOKEN")
	}
	ans, err := adminclient.New(*base, adminToken).Refund(context.Background(), *order, *void, *recycle, *reason)
	if err != nil {
		return err
	}
	if m := ans.Money; m != nil {
		fmt.Fprintf(stdout, "money   %s at %s (refund %s", m.Status, m.Provider, m.RefundNo)
		if m.RefundRef != "" {
			fmt.Fprintf(stdout, ", provider ref %s", m.RefundRef)
		}
		fmt.Fprintln(stdout, ")")
		if m.ByHand {
			fmt.Fprintf(stdout, "        %s offers no refund through cardshop: return the money there by hand\n", m.Provider)
		}
	} else {
		fmt.Fprintln(stdout, "money   not through a provider (paid through the signed callback: the storefront returns it)")
	}
	if ans.Accepted {
		fmt.Fprintf(stdout, "order   %s %s: the provider finishes the refund later; the codes follow then, as its first run chose\n", ans.OrderNo, ans.Status)
		return nil
	}
	fmt.Fprintf(stdout, "order   %s %s · codes recycled %d, voided %d\n", ans.OrderNo, ans.Status, ans.CodesRecycled, ans.CodesVoided)
	return nil
}
