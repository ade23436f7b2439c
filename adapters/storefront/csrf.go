package storefront

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"

	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/webkit"
)

// csrfCookie holds a browser's random CSRF seed; every form carries a token derived from it
// with the server's key (a signed double submit): a page of another site can neither read the
// cookie nor make the token.
const csrfCookie = "shop_csrf"

const csrfSeedKey = "storefront.csrfseed"

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// csrfKey derives the CSRF key from the configured secret (its own key: a token can never
// pass for a console cookie or a buyer token), or makes a random one.
func csrfKey(secret string) ([]byte, error) {
	if secret == "" {
		r, err := randomToken(32)
		if err != nil {
			return nil, err
		}
		secret = r
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("storefront-csrf v1"))
	return m.Sum(nil), nil
}

// tokenOf is the form token of a seed.
func (s *shop) tokenOf(seed string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte(seed))
	return b64(m.Sum(nil))
}

// csrfToken is the token of the browser's seed, set as a cookie first when it has none.
func (s *shop) csrfToken(c *fiber.Ctx) (string, error) {
	seed, _ := c.Locals(csrfSeedKey).(string)
	if seed == "" {
		seed = c.Cookies(csrfCookie)
	}
	if len(seed) < 32 {
		var err error
		if seed, err = randomToken(32); err != nil {
			return "", err
		}
		c.Cookie(&fiber.Cookie{Name: csrfCookie, Value: seed, Path: "/", HTTPOnly: true,
			SameSite: fiber.CookieSameSiteLaxMode, Secure: secure(c)})
		c.Locals(csrfSeedKey, seed)
	}
	return s.tokenOf(seed), nil
}

// csrf refuses a POST whose form token does not match the browser's seed: a 403 page, and
// nothing runs.
func (s *shop) csrf(c *fiber.Ctx) error {
	seed := c.Cookies(csrfCookie)
	if len(seed) < 32 || !hmac.Equal([]byte(formValue(c, "csrf")), []byte(s.tokenOf(seed))) {
		s.log.WarnContext(c.UserContext(), "storefront: post without a valid csrf token refused", "path", c.Path())
		return s.message(c, fiber.StatusForbidden, "storefront.csrf", "/")
	}
	return c.Next()
}

// sameSite refuses a POST a browser says came from another site: Sec-Fetch-Site
// "cross-site", or an Origin header naming another host. Every browser in use sends one of
// them with a form post, so this guards the product page's form too, which carries no token
// (the product page is cached, the same for every visitor, and its form only asks for the
// review page). The shop's pages send "Referrer-Policy: no-referrer", under which a browser
// sends "Origin: null" with their forms' posts: null names no host, and Sec-Fetch-Site decides.
// A POST with neither header (curl, old browsers) relies on the token alone.
func (s *shop) sameSite(c *fiber.Ctx) error {
	cross := c.Get("Sec-Fetch-Site") == "cross-site"
	if o := c.Get(fiber.HeaderOrigin); o != "" && o != "null" {
		u, err := url.Parse(o)
		cross = cross || err != nil || u.Host != string(c.Request().Host())
	}
	if cross {
		s.log.WarnContext(c.UserContext(), "storefront: cross-site post refused", "path", c.Path(),
			"origin", c.Get(fiber.HeaderOrigin), "fetch_site", c.Get("Sec-Fetch-Site"))
		return s.message(c, fiber.StatusForbidden, "storefront.csrf", "/")
	}
	return c.Next()
}

// maxFormBytes bounds a storefront form's body: the largest (checkout, with a captcha token)
// is far smaller.
const maxFormBytes = 16 << 10

const formKey = "storefront.form"

// parseForm reads a POST's form once, bounded, through the API's body reader (the app
// streams request bodies).
func (s *shop) parseForm(c *fiber.Ctx) error {
	b, err := webkit.ReadBody(c, maxFormBytes)
	if err != nil {
		return s.message(c, fiber.StatusRequestEntityTooLarge, "storefront.bad_form", "/")
	}
	v, err := url.ParseQuery(string(b))
	if err != nil {
		return s.message(c, fiber.StatusBadRequest, "storefront.bad_form", "/")
	}
	c.Locals(formKey, v)
	return c.Next()
}

// formValue is a field of the POST's form ("" when absent).
func formValue(c *fiber.Ctx, name string) string {
	v, _ := c.Locals(formKey).(url.Values)
	return v.Get(name)
}
