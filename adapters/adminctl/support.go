package adminctl

import (
	"context"
	"errors"
	"fmt"
	"io"
)

const confirmPaymentUsage = `Usage: cardshopctl confirm-payment -order NO -provider P -reference REF [-note TEXT]
         [-override REASON] [-url URL]

Marks a PENDING, CLOSED or FAILED order paid by hand (补单; POST
/admin/orders/NO/manual-payment; an operator's token in CARDSHOP_ADMIN_TOKEN). The service
asks the provider first and refuses ("409 provider_unpaid") when it does not confirm the
payment, unless an admin gives -override with the reason. A reference pays one order only
("409 reference_used"). The order then takes the paid path of a notification: PAID with its
codes, or UNFULFILLED when a CLOSED or FAILED order's stock is gone. Audited; raises the
manual_payment alert.

`

// confirmPayment marks an order paid by hand through the admin API.
func confirmPayment(args []string, stdout, stderr io.Writer) error {
	fs, base := operatorFlagSet("confirm-payment", confirmPaymentUsage, stderr)
	order := fs.String("order", "", "order number (required)")
	provider := fs.String("provider", "", "the provider that took the money, such as epay (required)")
	reference := fs.String("reference", "", "the provider's transaction reference (required)")
	note := fs.String("note", "", "what you saw (recorded with the confirmation)")
	override := fs.String("override", "", "admin only: why pay the order although the provider does not confirm it")
	if err := parseUsage(fs, args); err != nil {
		return err
	}
	if *order == "" || *provider == "" || *reference == "" {
		fs.Usage()
		return usageError{errors.New("-order, -provider and -reference are required")}
	}
	client, err := adminClient(*base)
	if err != nil {
		return err
	}
	ans, err := client.ConfirmPayment(context.Background(), *order, *provider, *reference, *note, *override)
	if err != nil {
		return refusal(err)
	}
	fmt.Fprintf(stdout, "order    %s %s (payment %s)\nprovider %s said: %s\n", ans.Order.OrderNo, ans.Order.Status,
		printable(ans.Order.PaymentRef), ans.Provider, printable(ans.Queried))
	if ans.Overridden {
		fmt.Fprintln(stdout, "         overridden by an admin, with the reason given")
	}
	return nil
}

const operatorDisableUsage = `Usage: cardshopctl operator-disable -name N [-url URL]

Disables an operator (POST /admin/operators/N/disable; an admin's token in
CARDSHOP_ADMIN_TOKEN): its token is refused and its console sessions end; it stays listed.
The last enabled admin cannot be disabled ("409 last_admin").

`

const operatorEnableUsage = `Usage: cardshopctl operator-enable -name N [-url URL]

Enables a disabled operator again, with its current token (POST /admin/operators/N/enable;
an admin's token in CARDSHOP_ADMIN_TOKEN).

`

// operatorDisable disables an operator.
func operatorDisable(args []string, stdout, stderr io.Writer) error {
	client, name, _, err := operatorArgs("operator-disable", operatorDisableUsage, false, args, stderr)
	if err != nil {
		return err
	}
	o, err := client.DisableOperator(context.Background(), name)
	if err != nil {
		return refusal(err)
	}
	printOperator(stdout, o)
	fmt.Fprintln(stdout, "disabled: its token is refused until operator-enable")
	return nil
}

// operatorEnable enables an operator again.
func operatorEnable(args []string, stdout, stderr io.Writer) error {
	client, name, _, err := operatorArgs("operator-enable", operatorEnableUsage, false, args, stderr)
	if err != nil {
		return err
	}
	o, err := client.EnableOperator(context.Background(), name)
	if err != nil {
		return refusal(err)
	}
	printOperator(stdout, o)
	return nil
}
