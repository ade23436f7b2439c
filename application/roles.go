package application

import "cardshop/domain"

// actionRoles is the action → role table: every write an operator may do, as the audit log
// names it, and the least role that may do it. A viewer reads everything but codes and
// operators; an operator runs the shop (products, imports, freezes, fulfils, buyer tokens, an
// order's codes, the blocklists, coupons); an admin moves money and truth (refunds, gate repair, voiding codes: stock
// destroyed for good, like a refund's void) and manages operators. Every driving adapter
// reads it through ActionRole; none restates it.
var actionRoles = map[string]domain.Role{
	"product.create":    domain.RoleOperator,
	"product.update":    domain.RoleOperator,
	"product.import":    domain.RoleOperator,
	"product.freeze":    domain.RoleOperator,
	"product.unfreeze":  domain.RoleOperator,
	"codes.void":        domain.RoleAdmin,
	"product.repair":    domain.RoleAdmin,
	"order.refund":      domain.RoleAdmin,
	"order.fulfil":      domain.RoleOperator,
	"order.mail_resent": domain.RoleOperator,
	"buyer_token.issue": domain.RoleOperator,
	"operator.create":   domain.RoleAdmin,
	"operator.update":   domain.RoleAdmin,
	"operator.rotate":   domain.RoleAdmin,
	"operator.remove":   domain.RoleAdmin,
	"operator.disable":  domain.RoleAdmin,
	"operator.enable":   domain.RoleAdmin,
	// A manual confirmation pays an order on an operator's word (an admin's alone when the
	// provider does not confirm it: ConfirmPaymentManually checks that itself).
	"order.confirm_payment": domain.RoleOperator,
	"alert.ack":             domain.RoleOperator,
	"blocklist.add":         domain.RoleOperator,
	"blocklist.remove":      domain.RoleOperator,

	// The payment channels configured in the console (Channels).
	ActionChannelSave:    domain.RoleAdmin,
	ActionChannelDisable: domain.RoleAdmin,
	ActionChannelTest:    domain.RoleAdmin,

	// An export hands over every order's buyer and e-mail at once, more than a viewer reads
	// one order at a time: the role that runs the shop (and keeps its books).
	ActionOrdersExport: domain.RoleOperator,

	// Where alerts are pushed, with the channels' secrets: admins.
	ActionAlertChannelCreate: domain.RoleAdmin,
	ActionAlertChannelUpdate: domain.RoleAdmin,
	ActionAlertChannelRemove: domain.RoleAdmin,
	ActionAlertChannelTest:   domain.RoleAdmin,

	// A coupon prices products, as a product's price does: the role that runs the shop
	// creates one, and withdraws or offers it again as it freezes and unfreezes a product.
	ActionCouponCreate:  domain.RoleOperator,
	ActionCouponDisable: domain.RoleOperator,
	ActionCouponEnable:  domain.RoleOperator,
}

// ActionRole returns the least role that may do the action; false when it is no action.
func ActionRole(action string) (domain.Role, bool) {
	r, ok := actionRoles[action]
	return r, ok
}

// ActionRoles returns a copy of the action → role table.
func ActionRoles() map[string]domain.Role {
	out := make(map[string]domain.Role, len(actionRoles))
	for a, r := range actionRoles {
		out[a] = r
	}
	return out
}
