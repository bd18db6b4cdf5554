package pool

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// waitFor polls cond until it holds or 5 s pass; cond reads what a watcher
// goroutine changed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestVhostUserSlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vhost")
	p, err := NewVhostUser("example.com/vhost", config.VhostUserSlots{Dir: dir, Slots: 2, Mode: "client", SocketName: "vhost.sock", ContainerPath: "/var/run/vhu"})
	if err != nil {
		t.Fatal(err)
	}
	ds := p.Devices()
	if got := ids(ds); !reflect.DeepEqual(got, []string{"slot0", "slot1"}) {
		t.Fatalf("devices = %v", got)
	}
	for _, d := range ds {
		if st, err := os.Stat(filepath.Join(dir, d.ID)); err != nil || !st.IsDir() {
			t.Errorf("slot directory %s not created: %v", d.ID, err)
		}
	}
	s1 := ds[1]
	if want := []Mount{{HostPath: filepath.Join(dir, "slot1"), ContainerPath: "/var/run/vhu/slot1"}}; !reflect.DeepEqual(s1.Mounts, want) {
		t.Errorf("slot1 mounts = %+v, want %+v", s1.Mounts, want)
	}
	// device-info spec §3.1.5: mode and the socket path the container sees.
	want := &devinfo.DeviceInfo{Type: "vhost-user", Version: "1.1.0", VhostUser: &devinfo.VhostUser{Mode: "client", Path: "/var/run/vhu/slot1/vhost.sock"}}
	if !reflect.DeepEqual(s1.Info, want) {
		t.Errorf("slot1 info = %+v", s1.Info.VhostUser)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- p.Watch(ctx, func() { changes <- struct{}{} }) }()
	// A removal before the watch starts is caught by its first refresh.
	if err := os.Remove(filepath.Join(dir, "slot0")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "slot0 unhealthy", func() bool { return !p.Devices()[0].Healthy })
	if err := os.Mkdir(filepath.Join(dir, "slot0"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "slot0 healthy", func() bool { return p.Devices()[0].Healthy })
	if len(changes) < 2 {
		t.Errorf("changed called %d times, want >= 2", len(changes))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch = %v", err)
	}
}

func TestMemifSlots(t *testing.T) {
	p, err := NewMemif("example.com/memif", config.MemifSlots{Dir: t.TempDir(), Slots: 1, Role: "slave", Mode: "ip", SocketName: "memif.sock", ContainerPath: "/run/memif"})
	if err != nil {
		t.Fatal(err)
	}
	want := &devinfo.DeviceInfo{Type: "memif", Version: "1.1.0", Memif: &devinfo.Memif{Role: "slave", Mode: "ip", Path: "/run/memif/slot0/memif.sock"}}
	if got := p.Devices()[0].Info; !reflect.DeepEqual(got, want) {
		t.Fatalf("info = %+v", got.Memif)
	}
	if err := p.Devices()[0].Info.Validate(); err != nil {
		t.Fatal(err)
	}
}
