package console

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// paymentsData is the Payments page: every provider, how it is configured, and the result of
// a test when one was just run.
type paymentsData struct {
	Channels []application.ChannelView
}

// channelData is a channel's edit page: the channel, the form as typed after a refusal
// (secrets never shown back), and the last test's result.
type channelData struct {
	Channel application.ChannelView
	Form    map[string]string // plain fields as typed
	Enabled bool
	Test    *application.ChannelTest
}

// paymentChannels lists the providers.
func (k *console) paymentChannels(c *fiber.Ctx) error {
	return k.paymentsPage(c, fiber.StatusOK, "", "")
}

func (k *console) paymentsPage(c *fiber.Ctx, status int, errMsg, notice string) error {
	views, err := k.payChannels.List(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	return k.render(c, status, "payments", view{Title: "console.payments.title", Error: errMsg, Notice: notice,
		Data: paymentsData{Channels: views}})
}

// channelView finds the provider of the route among the listed ones; when it answers false it
// has sent the error page (a failed read, or 404), whose result is answered.
func (k *console) channelView(c *fiber.Ctx) (v application.ChannelView, ok bool, answered error) {
	views, err := k.payChannels.List(c.UserContext())
	if err != nil {
		return v, false, k.fail(c, err)
	}
	for _, v := range views {
		if string(v.Provider) == c.Params("provider") {
			return v, true, nil
		}
	}
	return v, false, k.errorPage(c, fiber.StatusNotFound, "console.error.no_page")
}

// channel shows a provider's edit form (read-only when the environment manages it).
func (k *console) paymentChannel(c *fiber.Ctx) error {
	v, ok, answered := k.channelView(c)
	if !ok {
		return answered
	}
	return k.paymentChannelPage(c, fiber.StatusOK, channelData{Channel: v, Form: v.Fields, Enabled: v.Enabled || v.Version == 0}, "", "")
}

func (k *console) paymentChannelPage(c *fiber.Ctx, status int, d channelData, errMsg, notice string) error {
	return k.render(c, status, "payment", view{Title: "console.payments.edit_title", Error: errMsg, Notice: notice, Data: d})
}

// savePaymentChannel stores the form's settings. A refusal shows the form as typed with the reason
// and stores nothing; the audit entry names the fields set and the secrets replaced, never a
// secret's value.
func (k *console) savePaymentChannel(c *fiber.Ctx) error {
	v, ok, answered := k.channelView(c)
	if !ok {
		return answered
	}
	version, _ := strconv.ParseInt(formValue(c, "version"), 10, 64)
	ch := application.ChannelChange{Provider: v.Provider, Enabled: formValue(c, "enabled") == "on", Version: version,
		Fields: map[string]string{}, Secrets: map[string]string{}}
	var replaced []string
	for _, f := range v.Spec.Fields {
		if f.Secret {
			if s := formValue(c, "s_"+f.Name); s != "" {
				ch.Secrets[f.Name] = s
				replaced = append(replaced, f.Name)
			}
			continue
		}
		ch.Fields[f.Name] = formValue(c, "f_"+f.Name)
	}
	_, err := k.payChannels.Save(c.UserContext(), identityOf(c).Name, ch)
	k.record(c, application.ActionChannelSave, paymentChannelAudit(v.Spec, ch, replaced), err)
	if err == nil {
		return k.paymentsPage(c, fiber.StatusOK, "", k.text(k.lang(c), "console.payments.saved", "Provider", string(v.Provider)))
	}
	status, msg := describe(err)
	if status >= 500 {
		return k.fail(c, err)
	}
	if errors.Is(err, application.ErrChannelChanged) {
		msg = "console.payments.changed_meanwhile"
	} else {
		msg = k.text(k.lang(c), "console.payments.refused", "Reason", msg)
	}
	return k.paymentChannelPage(c, status, channelData{Channel: v, Form: ch.Fields, Enabled: ch.Enabled}, msg, "")
}

// paymentChannelAudit is a save's audit parameters: the provider, enabled, each plain field (a PEM
// text only as "set") and the names of the secrets replaced.
func paymentChannelAudit(spec application.ChannelSpec, ch application.ChannelChange, replaced []string) map[string]string {
	p := map[string]string{"provider": string(ch.Provider), "enabled": strconv.FormatBool(ch.Enabled)}
	for _, f := range spec.Fields {
		if f.Secret {
			continue
		}
		if v := strings.TrimSpace(ch.Fields[f.Name]); v != "" {
			if f.Multiline {
				v = "set"
			}
			p[f.Name] = v
		}
	}
	if len(replaced) > 0 {
		p["secrets_replaced"] = strings.Join(replaced, ",")
	}
	return p
}

// disablePaymentChannel stops offering a console channel to new orders.
func (k *console) disablePaymentChannel(c *fiber.Ctx) error {
	v, ok, answered := k.channelView(c)
	if !ok {
		return answered
	}
	version, _ := strconv.ParseInt(formValue(c, "version"), 10, 64)
	err := k.payChannels.Disable(c.UserContext(), identityOf(c).Name, v.Provider, version)
	k.record(c, application.ActionChannelDisable, map[string]string{"provider": string(v.Provider)}, err)
	if err == nil {
		return k.paymentsPage(c, fiber.StatusOK, "", k.text(k.lang(c), "console.payments.disabled_notice", "Provider", string(v.Provider)))
	}
	status, msg := describe(err)
	if status >= 500 {
		return k.fail(c, err)
	}
	if errors.Is(err, application.ErrChannelChanged) {
		msg = "console.payments.changed_meanwhile"
	}
	return k.paymentsPage(c, status, msg, "")
}

// testPaymentChannel runs the channel's test call and shows what the provider answered.
func (k *console) testPaymentChannel(c *fiber.Ctx) error {
	v, ok, answered := k.channelView(c)
	if !ok {
		return answered
	}
	res, err := k.payChannels.Test(c.UserContext(), v.Provider)
	params := map[string]string{"provider": string(v.Provider)}
	if err == nil {
		params["authenticated"], params["reachable"] = strconv.FormatBool(res.Authenticated), strconv.FormatBool(res.Reachable)
		params["order_no"] = string(res.OrderNo)
	}
	k.record(c, application.ActionChannelTest, params, err)
	switch {
	case errors.Is(err, domain.ErrProviderUnknown):
		return k.paymentChannelPage(c, fiber.StatusConflict, channelData{Channel: v, Form: v.Fields, Enabled: v.Enabled},
			"console.payments.test_nothing", "")
	case err != nil:
		return k.fail(c, err)
	}
	return k.paymentChannelPage(c, fiber.StatusOK, channelData{Channel: v, Form: v.Fields, Enabled: v.Enabled, Test: &res}, "", "")
}
