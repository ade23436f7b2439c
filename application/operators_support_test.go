package application_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"cardshop/application"
	"cardshop/domain"
)

func TestLastAdminCannotBeDemotedDisabledOrRemoved(t *testing.T) {
	f := newFixture(t)
	admin := f.shop.Admin
	_, tok, err := admin.CreateOperator(f.ctx, "ada", "admin")
	is(t, "create", err, nil)
	_, err = admin.SetOperatorRole(f.ctx, "ada", "operator")
	is(t, "demote the only admin", err, domain.ErrLastAdmin)
	_, err = admin.DisableOperator(f.ctx, "ada")
	is(t, "disable the only admin", err, domain.ErrLastAdmin)
	is(t, "remove the only admin", admin.RemoveOperator(f.ctx, "ada"), domain.ErrLastAdmin)
	if o, err := admin.Operator(f.ctx, "ada"); err != nil || o.Role != domain.RoleAdmin || o.Disabled() {
		t.Fatalf("refused changes changed ada: %+v, %v", o, err)
	}

	_, _, err = admin.CreateOperator(f.ctx, "bea", "admin")
	is(t, "create", err, nil)
	o, err := admin.DisableOperator(f.ctx, "ada")
	is(t, "disable one of two admins", err, nil)
	if !o.Disabled() {
		t.Fatalf("not disabled: %+v", o)
	}
	_, err = admin.Authenticate(f.ctx, tok)
	is(t, "a disabled operator's token", err, domain.ErrUnauthorized)
	_, err = admin.SetOperatorRole(f.ctx, "bea", "viewer")
	is(t, "demote the last enabled admin", err, domain.ErrLastAdmin)
	// A disabled admin may be demoted: it is not one of the enabled admins.
	_, err = admin.SetOperatorRole(f.ctx, "ada", "viewer")
	is(t, "demote a disabled admin", err, nil)
	_, err = admin.EnableOperator(f.ctx, "ada")
	is(t, "enable", err, nil)
	if id, err := admin.Authenticate(f.ctx, tok); err != nil || id.Role != domain.RoleViewer {
		t.Fatalf("enabled again: %+v, %v", id, err)
	}
	_, err = admin.DisableOperator(f.ctx, "nobody")
	is(t, "unknown operator", err, domain.ErrOperatorNotFound)
}

// TestLastAdminRulesUnderConcurrency: admins demote, disable and remove one another from many
// goroutines at once; exactly one enabled admin is left, whatever the interleaving.
func TestLastAdminRulesUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	runLastAdminRace(t, f.shop.Admin)
}

func runLastAdminRace(t *testing.T, admin *application.Admin) {
	t.Helper()
	ctx := t.Context()
	const n = 12
	for i := range n {
		if _, _, err := admin.CreateOperator(ctx, fmt.Sprintf("adm-%d", i), "admin"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("adm-%d", i)
			var err error
			switch i % 3 {
			case 0:
				_, err = admin.SetOperatorRole(ctx, name, "operator")
			case 1:
				_, err = admin.DisableOperator(ctx, name)
			default:
				err = admin.RemoveOperator(ctx, name)
			}
			if err != nil && !errors.Is(err, domain.ErrLastAdmin) {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	ops, err := admin.Operators(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enabled := 0
	for _, o := range ops {
		if o.Role == domain.RoleAdmin && !o.Disabled() {
			enabled++
		}
	}
	if enabled != 1 {
		t.Fatalf("%d enabled admins left, want 1: %+v", enabled, ops)
	}
}
