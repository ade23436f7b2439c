package console

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// channelsData is the alert channels page: every channel (shown with its secret's fingerprint,
// never the secret), and the add form as last typed (kept after a refusal, the secret
// excepted: it is typed again).
type channelsData struct {
	Channels []channelView
	Form     channelForm
	Types    []domain.AlertChannelType
	Kinds    []string
	Edit     bool // the page is one channel's edit form, not the list
}

// channelView is a channel as the page shows it.
type channelView struct {
	domain.AlertChannel
	Fingerprint string
}

// channelForm is the add or edit form's fields.
type channelForm struct {
	ID      int64
	Name    string
	Type    string
	Target  string
	Kinds   []string // the known kinds ticked
	Other   string   // other kinds, comma-separated
	Stock   bool
	Enabled bool
	// Fingerprint is the stored secret's, on the edit form (left empty, the secret is kept).
	Fingerprint string
}

// Ticked reports whether the form ticks kind.
func (f channelForm) Ticked(kind string) bool { return slices.Contains(f.Kinds, kind) }

func viewOf(c domain.AlertChannel) channelView {
	return channelView{AlertChannel: c, Fingerprint: c.Fingerprint()}
}

// channelFormOf is the edit form of a stored channel.
func channelFormOf(c domain.AlertChannel) channelForm {
	f := channelForm{ID: c.ID, Name: c.Name, Type: string(c.Type), Target: c.Target, Stock: c.Stock,
		Enabled: c.Enabled, Fingerprint: c.Fingerprint()}
	var other []string
	for _, k := range c.Kinds {
		if slices.Contains(application.AlertKinds, k) {
			f.Kinds = append(f.Kinds, k)
		} else {
			other = append(other, k)
		}
	}
	f.Other = strings.Join(other, ", ")
	return f
}

// readChannelForm reads the posted form: the kinds ticked and typed, one list.
func readChannelForm(c *fiber.Ctx) (channelForm, domain.AlertChannel) {
	v, _ := c.Locals(formKey).(url.Values)
	f := channelForm{Name: v.Get("name"), Type: v.Get("type"), Target: v.Get("target"), Other: v.Get("other_kinds"),
		Stock: v.Get("stock") == "on", Enabled: v.Get("enabled") == "on"}
	kinds := []string{}
	for _, k := range v["kind"] {
		if slices.Contains(application.AlertKinds, k) {
			f.Kinds = append(f.Kinds, k)
		}
		kinds = append(kinds, k)
	}
	for _, k := range strings.Split(f.Other, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds = append(kinds, k)
		}
	}
	return f, domain.AlertChannel{Name: f.Name, Type: domain.AlertChannelType(f.Type), Target: f.Target,
		Secret: domain.Secret(v.Get("secret")), Kinds: kinds, Stock: f.Stock, Enabled: f.Enabled}
}

// channelAudit is what the audit log records of a channel's save: its settings and whether
// the secret changed, with the new one's fingerprint; never the secret.
func channelAudit(ch domain.AlertChannel) map[string]string {
	p := map[string]string{"name": ch.Name, "type": string(ch.Type), "target": ch.Target,
		"kinds": strings.Join(ch.Kinds, ","), "stock": strconv.FormatBool(ch.Stock), "enabled": strconv.FormatBool(ch.Enabled),
		"credential_changed": strconv.FormatBool(ch.Secret != "")}
	if ch.Secret != "" {
		p["fingerprint"] = ch.Fingerprint()
	}
	return p
}

// alertChannels lists the channels with the add form.
func (k *console) alertChannels(c *fiber.Ctx) error {
	return k.channelsPage(c, fiber.StatusOK, channelForm{Type: string(domain.ChannelTelegram), Enabled: true}, "", "")
}

// channelsPage renders the list with form, an error or a notice.
func (k *console) channelsPage(c *fiber.Ctx, status int, form channelForm, errMsg, notice string) error {
	cs, err := k.channels.List(c.UserContext(), identityOf(c))
	if err != nil {
		return k.channelFail(c, err)
	}
	d := channelsData{Form: form, Types: domain.AlertChannelTypes, Kinds: application.AlertKinds}
	for _, ch := range cs {
		d.Channels = append(d.Channels, viewOf(ch))
	}
	return k.render(c, status, "alertchannels", view{Title: "console.alerts.channels.title", Error: errMsg, Notice: notice, Data: d})
}

// saveFailed shows a refused save on the page it came from, with the form as typed.
func (k *console) saveFailed(c *fiber.Ctx, form channelForm, err error) error {
	status, msg := describe(err)
	var ve *domain.ValidationError
	switch {
	case errors.As(err, &ve) && slices.Contains([]string{"name", "type", "target", "secret", "kinds"}, ve.Field):
		msg = "console.alerts.channels.invalid_" + ve.Field // in the page's language, the hints beside
	case errors.Is(err, domain.ErrAlertChannelNotFound):
		return k.channelFail(c, err)
	case errors.Is(err, domain.ErrAlertChannelExists):
		status, msg = fiber.StatusConflict, "console.alerts.channels.name_taken"
	case status >= 500:
		return k.channelFail(c, err)
	}
	if form.ID != 0 {
		return k.channelPage(c, status, form, msg)
	}
	return k.channelsPage(c, status, form, msg, "")
}

// createChannel saves a new channel; a refused one is said on the page, nothing stored.
func (k *console) createChannel(c *fiber.Ctx) error {
	form, ch := readChannelForm(c)
	saved, err := k.channels.Save(c.UserContext(), identityOf(c), ch)
	k.record(c, application.ActionAlertChannelCreate, channelAudit(ch), err)
	if err != nil {
		return k.saveFailed(c, form, err)
	}
	return k.channelsPage(c, fiber.StatusOK, channelForm{Type: string(domain.ChannelTelegram), Enabled: true}, "",
		k.text(k.lang(c), "console.alerts.channels.saved", "Name", saved.Name))
}

// channelID is the route's channel id; a malformed one is a channel not found.
func channelID(c *fiber.Ctx) (int64, error) {
	id, err := strconv.ParseInt(c.Params("channel_id"), 10, 64)
	if err != nil || id < 1 {
		return 0, domain.ErrAlertChannelNotFound
	}
	return id, nil
}

// editChannel shows a channel's edit form.
func (k *console) editChannel(c *fiber.Ctx) error {
	id, err := channelID(c)
	if err != nil {
		return k.channelFail(c, err)
	}
	ch, err := k.channels.Channel(c.UserContext(), identityOf(c), id)
	if err != nil {
		return k.channelFail(c, err)
	}
	return k.channelPage(c, fiber.StatusOK, channelFormOf(ch), "")
}

// channelPage renders the edit form.
func (k *console) channelPage(c *fiber.Ctx, status int, form channelForm, errMsg string) error {
	return k.render(c, status, "alertchannels", view{Title: "console.alerts.channel.title", Error: errMsg,
		Data: channelsData{Form: form, Kinds: application.AlertKinds, Edit: true}})
}

// updateChannel saves an edited channel; an empty secret keeps the stored one.
func (k *console) updateChannel(c *fiber.Ctx) error {
	id, err := channelID(c)
	if err != nil {
		return k.channelFail(c, err)
	}
	form, ch := readChannelForm(c)
	form.ID, ch.ID = id, id
	if old, err := k.channels.Channel(c.UserContext(), identityOf(c), id); err == nil {
		form.Type, form.Fingerprint = string(old.Type), old.Fingerprint()
	}
	saved, err := k.channels.Save(c.UserContext(), identityOf(c), ch)
	k.record(c, application.ActionAlertChannelUpdate, channelAudit(ch), err)
	if err != nil {
		return k.saveFailed(c, form, err)
	}
	return k.channelsPage(c, fiber.StatusOK, channelForm{Type: string(domain.ChannelTelegram), Enabled: true}, "",
		k.text(k.lang(c), "console.alerts.channels.saved", "Name", saved.Name))
}

// removeChannel deletes a channel; its pushes still waiting are dropped by the relay.
func (k *console) removeChannel(c *fiber.Ctx) error {
	id, err := channelID(c)
	var ch domain.AlertChannel
	if err == nil {
		ch, err = k.channels.Remove(c.UserContext(), identityOf(c), id)
	}
	k.record(c, application.ActionAlertChannelRemove, map[string]string{"name": ch.Name, "type": string(ch.Type)}, err)
	if err != nil {
		return k.channelFail(c, err)
	}
	return k.channelsPage(c, fiber.StatusOK, channelForm{Type: string(domain.ChannelTelegram), Enabled: true}, "",
		k.text(k.lang(c), "console.alerts.channels.removed", "Name", ch.Name))
}

// testChannel pushes one test message through the channel now and shows what it answered.
func (k *console) testChannel(c *fiber.Ctx) error {
	id, err := channelID(c)
	if err != nil {
		return k.channelFail(c, err)
	}
	l := k.lang(c)
	ch, err := k.channels.Test(c.UserContext(), identityOf(c), id, k.text(l, "console.alerts.channels.test_message"))
	k.record(c, application.ActionAlertChannelTest, map[string]string{"name": ch.Name, "type": string(ch.Type)}, err)
	fresh := channelForm{Type: string(domain.ChannelTelegram), Enabled: true}
	var refused *domain.PushRefusedError
	var limited *domain.RetryAfterError
	switch {
	case err == nil:
		return k.channelsPage(c, fiber.StatusOK, fresh, "", k.text(l, "console.alerts.channels.test_ok", "Name", ch.Name))
	case errors.As(err, &refused):
		return k.channelsPage(c, fiber.StatusOK, fresh, k.text(l, "console.alerts.channels.test_refused",
			"Name", ch.Name, "Reason", refused.Reason), "")
	case errors.As(err, &limited):
		return k.channelsPage(c, fiber.StatusOK, fresh, k.text(l, "console.alerts.channels.test_limited",
			"Name", ch.Name, "Reason", limited.Reason, "Seconds", int(limited.After.Seconds())), "")
	case errors.Is(err, domain.ErrAlertChannelNotFound), errors.Is(err, domain.ErrForbidden):
		return k.channelFail(c, err)
	}
	// Unreachable, a 5xx, a timeout: the channel's error text names no secret (alertpush).
	return k.channelsPage(c, fiber.StatusOK, fresh, k.text(l, "console.alerts.channels.test_failed",
		"Name", ch.Name, "Reason", err.Error()), "")
}

// channelFail is fail for the channels' pages: a channel that does not exist (no route of the
// admin API has one, so the shared error table has no row for it) is the not-found page.
func (k *console) channelFail(c *fiber.Ctx, err error) error {
	if errors.Is(err, domain.ErrAlertChannelNotFound) {
		return k.errorPage(c, fiber.StatusNotFound, "console.alerts.channels.not_found")
	}
	return k.fail(c, err)
}
