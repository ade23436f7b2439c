package application

import (
	"context"

	"cardshop/domain"
)

// RaiseAlert raises al as the use cases do (recorded, folded, pushed): tests raise alerts of
// any kind without staging the failure behind each.
func (a *App) RaiseAlert(ctx context.Context, al domain.Alert) { a.core.alerts.Alert(ctx, al) }
