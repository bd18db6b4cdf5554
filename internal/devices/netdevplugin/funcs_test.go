package netdevplugin

import (
	"errors"
	"fmt"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestCNIError(t *testing.T) {
	inner := types.NewError(types.ErrTryAgainLater, "busy", "details")
	if got := cniError(inner); got != inner {
		t.Fatalf("a bare *types.Error changed: %v", got)
	}
	got := cniError(fmt.Errorf("multinet-netdev: device eth3: %w", inner))
	var te *types.Error
	if !errors.As(got, &te) || te.Code != types.ErrTryAgainLater || te.Msg != "multinet-netdev: device eth3: busy; details" {
		t.Fatalf("cniError = %#v", got)
	}
	plain := errors.New("plain")
	if cniError(plain) != plain || cniError(nil) != nil {
		t.Fatal("errors without *types.Error must pass unchanged")
	}
}
