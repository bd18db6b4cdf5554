package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The keys that keep hung delegates from stalling the node: defaults, read from the file, and checked by Complete.
func TestConfigHungDelegateKeys(t *testing.T) {
	d := Defaults()
	if d.ReservedInFlight != 4 || d.DelegateSlotTimeout.Duration != 10*time.Second || d.TeardownGrace.Duration != 5*time.Second {
		t.Errorf("defaults reservedInFlight %d, delegateSlotTimeout %s, teardownGrace %s; want 4, 10s, 5s",
			d.ReservedInFlight, d.DelegateSlotTimeout, d.TeardownGrace)
	}

	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("reservedInFlight: 2\ndelegateSlotTimeout: 3s\nteardownGrace: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.ReservedInFlight != 2 || c.DelegateSlotTimeout.Duration != 3*time.Second || c.TeardownGrace.Duration != time.Second || c.MaxInFlight != Defaults().MaxInFlight {
		t.Errorf("loaded %+v", c)
	}

	for _, tt := range []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{"no reserve", func(c *Config) { c.ReservedInFlight = 0 }, "reservedInFlight 0"},
		{"no slot timeout", func(c *Config) { c.DelegateSlotTimeout = Duration{} }, "delegateSlotTimeout"},
		{"no teardown grace", func(c *Config) { c.TeardownGrace = Duration{-time.Second} }, "teardownGrace"},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			c := Defaults()
			c.NodeName = "node-a"
			tt.mod(&c)
			if err := c.Complete(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Complete() = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
	c = Defaults()
	c.NodeName = "node-a"
	if err := c.Complete(); err != nil {
		t.Errorf("Complete() of the defaults: %v", err)
	}
}
