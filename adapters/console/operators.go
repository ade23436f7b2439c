package console

import (
	"github.com/gofiber/fiber/v2"

	"cardshop/adapters/i18n"
	"cardshop/adapters/webkit"
	"cardshop/domain"
)

// operatorsData is the Operators screen: every operator, the roles to choose from, and, on
// the answer to a creation or a rotation only, the new token (shown this once: never stored,
// logged nor audited, and the page is not cached).
type operatorsData struct {
	Operators []domain.Operator
	Roles     []domain.Role
	Name      string // the creation form as sent
	Role      string
	TokenFor  domain.OperatorName
	Token     string
}

var allRoles = []domain.Role{domain.RoleViewer, domain.RoleOperator, domain.RoleAdmin}

// operatorsScreen lists the operators (admin).
func (k *console) operatorsScreen(c *fiber.Ctx) error {
	return k.operatorsPage(c, fiber.StatusOK, "", "", operatorsData{Role: string(domain.RoleOperator)})
}

func (k *console) operatorsPage(c *fiber.Ctx, status int, errMsg, notice string, d operatorsData) error {
	ops, err := k.operators.Operators(c.UserContext())
	if err != nil {
		return k.fail(c, err)
	}
	d.Operators, d.Roles = ops, allRoles
	return k.render(c, status, "operators", view{Title: "console.support.operators.title", Error: errMsg, Notice: notice, Data: d})
}

// createOperator adds an operator and shows its token on this answer only.
func (k *console) createOperator(c *fiber.Ctx) error {
	d := operatorsData{Name: formValue(c, "name"), Role: formValue(c, "role")}
	o, token, err := k.operators.CreateOperator(c.UserContext(), d.Name, d.Role)
	k.record(c, "operator.create", map[string]string{"name": d.Name, "role": d.Role}, err)
	if err != nil {
		return k.operatorWriteFailed(c, err, d)
	}
	d = operatorsData{Role: string(domain.RoleOperator), TokenFor: o.Name, Token: token}
	return k.operatorsPage(c, fiber.StatusOK, "", "console.support.operators.created", d)
}

// setOperatorRole changes an operator's role; the last enabled admin keeps its own.
func (k *console) setOperatorRole(c *fiber.Ctx) error {
	role := formValue(c, "role")
	_, err := k.operators.SetOperatorRole(c.UserContext(), c.Params("name"), role)
	k.record(c, "operator.update", map[string]string{"role": role}, err)
	return k.afterOperatorWrite(c, err, "console.support.operators.role_changed")
}

// rotateOperator gives an operator a new token, shown on this answer only; the old token and
// every console session of the operator end at once.
func (k *console) rotateOperator(c *fiber.Ctx) error {
	o, token, err := k.operators.RotateOperator(c.UserContext(), c.Params("name"))
	k.record(c, "operator.rotate", nil, err)
	if err != nil {
		return k.operatorWriteFailed(c, err, operatorsData{Role: string(domain.RoleOperator)})
	}
	d := operatorsData{Role: string(domain.RoleOperator), TokenFor: o.Name, Token: token}
	return k.operatorsPage(c, fiber.StatusOK, "", "console.support.operators.rotated", d)
}

func (k *console) disableOperator(c *fiber.Ctx) error {
	_, err := k.operators.DisableOperator(c.UserContext(), c.Params("name"))
	k.record(c, "operator.disable", nil, err)
	return k.afterOperatorWrite(c, err, "console.support.operators.disabled")
}

func (k *console) enableOperator(c *fiber.Ctx) error {
	_, err := k.operators.EnableOperator(c.UserContext(), c.Params("name"))
	k.record(c, "operator.enable", nil, err)
	return k.afterOperatorWrite(c, err, "console.support.operators.enabled")
}

func (k *console) afterOperatorWrite(c *fiber.Ctx, err error, notice string) error {
	if err != nil {
		return k.operatorWriteFailed(c, err, operatorsData{Role: string(domain.RoleOperator)})
	}
	return k.operatorsPage(c, fiber.StatusOK, "", notice, operatorsData{Role: string(domain.RoleOperator)})
}

// operatorWriteFailed shows the screen again with the refusal in the page's language.
func (k *console) operatorWriteFailed(c *fiber.Ctx, err error, d operatorsData) error {
	status, msg := k.supportError(c, err)
	if status >= 500 {
		return k.fail(c, err)
	}
	return k.operatorsPage(c, status, msg, "", d)
}

// supportError is err's status and what the page says: the message of this area's catalogue
// for the error's code (console.support.error.<code>, which says what to do on these pages)
// when it has one, else the console's words for the error in the request's language.
func (k *console) supportError(c *fiber.Ctx, err error) (int, string) {
	status, code, _ := webkit.Describe(err)
	if id := "console.support.error." + code; k.msgs.Has(i18n.English, id) {
		return status, id
	}
	return k.explain(c, err)
}
