package console

import (
	"strings"
	"time"

	// The zone database inside the binary: a time zone the operator picks must load on a host
	// or container without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/gofiber/fiber/v2"
)

// ZoneCookieName is the cookie that holds the time zone the operator picked on this browser
// (an IANA name such as Europe/Berlin). It is a preference, not a credential: without it, or
// with a name that does not load, the console shows times in Config.TimeZone.
const ZoneCookieName = "cardshop_console_tz"

// zoneCookieAge is how long the browser keeps the picked zone.
const zoneCookieAge = 365 * 24 * time.Hour

// commonZones are offered in the settings form's list; any IANA name is accepted.
var commonZones = []string{
	"UTC", "Europe/London", "Europe/Berlin", "Europe/Paris", "Europe/Moscow", "Africa/Lagos",
	"Asia/Dubai", "Asia/Kolkata", "Asia/Singapore", "Asia/Shanghai", "Asia/Hong_Kong",
	"Asia/Tokyo", "Asia/Seoul", "Australia/Sydney", "Pacific/Auckland", "America/Sao_Paulo",
	"America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
}

// loadZone loads an IANA zone name. It refuses "Local" (the server's zone, not the
// operator's) and names that are not plain zone names.
func loadZone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" || name == "Local" || len(name) > 64 || strings.Contains(name, "..") {
		return nil, invalid("time_zone", "console.err.zone")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalid("time_zone", "console.err.zone")
	}
	return loc, nil
}

// zone is the time zone the console shows and reads times in for this request: the browser's
// picked zone, else the configured one.
func (k *console) zone(c *fiber.Ctx) *time.Location {
	if v := c.Cookies(ZoneCookieName); v != "" {
		if loc, err := loadZone(v); err == nil {
			return loc
		}
	}
	return k.cfg.TimeZone
}

// whenIn formats a time for a page: in loc, to the second, with the zone's abbreviation.
func whenIn(loc *time.Location) func(time.Time) string {
	return func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.In(loc).Format("2006-01-02 15:04:05 MST")
	}
}

// settingsData is the settings page's form.
type settingsData struct {
	Zone    string
	Default string
	Zones   []string
}

// settings shows the time zone form.
func (k *console) settings(c *fiber.Ctx) error {
	d := settingsData{Zone: k.zone(c).String(), Default: k.cfg.TimeZone.String(), Zones: commonZones}
	notice := ""
	if c.Query("saved") != "" {
		notice = k.tr(c, "console.settings.saved", "Zone", d.Zone)
	}
	return k.render(c, fiber.StatusOK, "settings", view{Title: "console.settings.title", Notice: notice, Data: d})
}

// saveSettings stores the picked time zone in this browser's cookie; "default" (or an empty
// field) forgets it. Not audited: it changes how this browser shows times, nothing of the shop.
func (k *console) saveSettings(c *fiber.Ctx) error {
	name := strings.TrimSpace(formValue(c, "time_zone"))
	d := settingsData{Zone: name, Default: k.cfg.TimeZone.String(), Zones: commonZones}
	if name == "" || name == "default" {
		c.Cookie(&fiber.Cookie{Name: ZoneCookieName, Value: "", Path: "/console", MaxAge: -1,
			HTTPOnly: true, Secure: secure(c), SameSite: fiber.CookieSameSiteStrictMode})
		return c.Redirect("/console/settings?saved=1", fiber.StatusSeeOther)
	}
	loc, err := loadZone(name)
	if err != nil {
		_, msg := k.explain(c, err)
		return k.render(c, fiber.StatusBadRequest, "settings", view{Title: "console.settings.title", Error: msg, Data: d})
	}
	c.Cookie(&fiber.Cookie{Name: ZoneCookieName, Value: loc.String(), Path: "/console",
		MaxAge: int(zoneCookieAge / time.Second), HTTPOnly: true, Secure: secure(c),
		SameSite: fiber.CookieSameSiteStrictMode})
	return c.Redirect("/console/settings?saved=1", fiber.StatusSeeOther)
}
