package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

func sample(id string) *Record {
	return &Record{
		ContainerID:  id,
		Netns:        "/var/run/netns/x",
		PodNamespace: "ns1",
		PodName:      "p",
		PodUID:       "uid-1",
		CNIArgs:      "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1",
		Attachments: []Attachment{
			{Network: "cbr0", Default: true, IfName: "eth0", ConfList: json.RawMessage(`{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"bridge"}]}`), Phase: PhaseAdded, Result: json.RawMessage(`{"cniVersion":"1.0.0"}`)},
			{Network: "ns1/net-a", IfName: "net1", ConfList: json.RawMessage(`{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"macvlan"}]}`), CapabilityArgs: map[string]any{"mac": "02:00:00:00:00:01"}, Phase: PhasePlanned},
		},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for name, save := range map[string]func(*Store, *Record) error{"Save": (*Store).Save, "SaveBuffered": (*Store).SaveBuffered} {
		t.Run(name, func(t *testing.T) { testSaveLoadRoundTrip(t, save) })
	}
}

func testSaveLoadRoundTrip(t *testing.T, save func(*Store, *Record) error) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := sample("abc123")
	if err := save(s, in); err != nil {
		t.Fatal(err)
	}
	out, err := s.Load("abc123")
	if err != nil {
		t.Fatal(err)
	}
	if out.Version != RecordVersion || out.Updated.IsZero() {
		t.Fatalf("version/updated not stamped: %+v", out)
	}
	in.Updated = out.Updated
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip differs:\n in=%+v\nout=%+v", in, out)
	}
	ids, err := s.List()
	if err != nil || len(ids) != 1 || ids[0] != "abc123" {
		t.Fatalf("List = %v, %v", ids, err)
	}
	entries, _ := os.ReadDir(s.Dir())
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestLoadErrors(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing record: got %v, want ErrNotFound", err)
	}
	for name, content := range map[string]string{
		"truncated": `{"containerID":"truncated","attachments":[{"netw`,
		"wrongid":   `{"containerID":"other","attachments":[]}`,
		"future":    `{"version":99,"containerID":"future","attachments":[]}`,
		"empty":     ``,
	} {
		if err := os.WriteFile(filepath.Join(s.Dir(), name+".json"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(name); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

func TestInvalidContainerIDs(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "..", "../x", "a/b", ".hidden", "a\x00b"} {
		if err := s.Save(&Record{ContainerID: id}); err == nil {
			t.Errorf("Save(%q) accepted an unsafe container ID", id)
		}
		if _, err := s.Load(id); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Load(%q) = %v, want a validation error", id, err)
		}
	}
}

func TestOverwriteAndDelete(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := sample("c1")
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	r.Attachments[1].Phase = PhaseAdded
	r.Complete = true
	if err := s.Save(r); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("c1")
	if err != nil || !got.Complete || got.Attachments[1].Phase != PhaseAdded {
		t.Fatalf("overwrite not visible: %+v %v", got, err)
	}
	if err := s.Delete("c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("c1"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.Load("c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestListRemovesInterruptedWrites(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(s.Dir(), ".tmp-c2.json-123")
	if err := os.WriteFile(tmp, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	ids, err := s.List()
	if err != nil || len(ids) != 0 {
		t.Fatalf("List = %v, %v", ids, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file not removed: %v", err)
	}
}

// BenchmarkSave measures one atomic record write on the test's temporary
// directory, as the caller sees it: Save with SyncEach (fsync of the file and
// the directory before it returns), Save with SyncBackground (the default:
// the group commit runs in the background; the benchmark's last Flush is
// timed, not each save's sync) and SaveBuffered (no fsync at all).
func BenchmarkSave(b *testing.B) {
	for _, bc := range []struct {
		name string
		mode SyncMode
		save func(*Store, *Record) error
	}{
		{"durable", SyncEach, (*Store).Save},
		{"group-commit", SyncBackground, (*Store).Save},
		{"buffered", SyncBackground, (*Store).SaveBuffered},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := OpenStore(b.TempDir(), Options{Sync: bc.mode})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := s.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}()
			r := sample("bench")
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.save(s, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestListDoesNotRemoveSavesInProgress runs List (as GC does) while other
// containers' records are being saved: cleaning up temporary files of
// interrupted writes must never remove the temporary file of a save in
// progress, whose rename would then fail (and with it the ADD).
func TestListDoesNotRemoveSavesInProgress(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const (
		writers = 32
		saves   = 200 // per writer
		listers = 4
	)
	var (
		wg       sync.WaitGroup
		failures atomic.Int64
		firstErr atomic.Value
		done     = make(chan struct{})
	)
	for l := 0; l < listers; l++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.List(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					failures.Add(1)
				}
			}
		}()
	}
	var ww sync.WaitGroup
	for w := 0; w < writers; w++ {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for i := 0; i < saves; i++ {
				r := sample(fmt.Sprintf("c%d-%d", w, i%4))
				save := s.SaveBuffered
				if i%8 == 0 {
					save = s.Save
				}
				if err := save(r); err != nil {
					firstErr.CompareAndSwap(nil, err)
					failures.Add(1)
				}
			}
		}()
	}
	ww.Wait()
	close(done)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d saves or lists failed while List ran concurrently; first: %v", n, writers*saves, firstErr.Load())
	}
	ids, err := s.List()
	if err != nil || len(ids) != writers*4 {
		t.Fatalf("List = %d ids, %v; want %d", len(ids), err, writers*4)
	}
	entries, _ := os.ReadDir(s.Dir())
	if len(entries) != writers*4 {
		t.Fatalf("temporary files left behind: %d entries, want %d", len(entries), writers*4)
	}
}

// TestListKeepsTempFilesWhileAWriterHoldsTheLock: a temporary file is removed
// only once no writer (here another process, simulated by a second open of
// the directory holding the writers' shared lock) is in progress.
func TestListKeepsTempFilesWhileAWriterHoldsTheLock(t *testing.T) {
	s, err := NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writer, err := lockDir(s.Dir(), unix.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(s.Dir(), ".tmp-c3.json-456")
	if err := os.WriteFile(tmp, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("temporary file of a write in progress removed: %v", err)
	}
	writer.Close()
	if _, err := s.List(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file not removed once its writer is gone: %v", err)
	}
}
