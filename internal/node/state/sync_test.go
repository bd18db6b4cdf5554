package state

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// syncLog records the OnSync calls of a Store.
type syncLog struct {
	mu    sync.Mutex
	calls []syncCall
}

type syncCall struct {
	records int
	err     error
}

func (l *syncLog) onSync(records int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, syncCall{records, err})
}

func (l *syncLog) all() []syncCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]syncCall(nil), l.calls...)
}

// heldStore returns a SyncBackground store whose group commits wait until
// release is called (the returned func; also called at cleanup).
func heldStore(t *testing.T, dir string, log *syncLog) (*Store, func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	s, err := OpenStore(dir, Options{OnSync: log.onSync, BeforeGroupCommit: func() { <-gate }})
	if err != nil {
		t.Fatal(err)
	}
	return s, release
}

func flush(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// With the default SyncBackground, Save returns before the record is
// fsynced, yet the record is complete and readable at once, also by a new
// Store over the same directory (a multinetd restarted after a crash, before
// the group commit ran); the background syncer then makes it durable without
// anyone asking, and a record deleted meanwhile does not fail the round.
func TestGroupCommitRecordReadableBeforeSync(t *testing.T) {
	dir := t.TempDir()
	log := &syncLog{}
	s, release := heldStore(t, dir, log)
	in := sample("c1")
	if err := s.Save(in); err != nil {
		t.Fatal(err)
	}
	gone := sample("c2")
	if err := s.Save(gone); err != nil {
		t.Fatal(err)
	}
	if n := s.Unsynced(); n != 2 {
		t.Fatalf("Unsynced() = %d right after two Saves with the group commit held, want 2", n)
	}

	restarted, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := restarted.Load("c1")
	if err != nil {
		t.Fatalf("a new Store cannot load the record saved before the group commit: %v", err)
	}
	in.Updated = out.Updated
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("record read back before the group commit differs:\n in=%+v\nout=%+v", in, out)
	}
	if err := restarted.Delete("c2"); err != nil { // its DEL, before the sync
		t.Fatal(err)
	}
	if got := log.all(); len(got) != 0 {
		t.Fatalf("group commit ran while held: %+v", got)
	}

	release()
	flush(t, s)
	if got, want := log.all(), []syncCall{{records: 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("group commits = %+v, want %+v (one round, both records, no error)", got, want)
	}
	if n := s.Unsynced(); n != 0 {
		t.Fatalf("Unsynced() = %d after the group commit", n)
	}
	if _, err := s.Load("c2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted record: %v, want ErrNotFound", err)
	}
}

// Saves of many containers made while a group commit is pending go into one
// round, each saved record counted once.
func TestGroupCommitBatchesConcurrentSaves(t *testing.T) {
	log := &syncLog{}
	s, release := heldStore(t, t.TempDir(), log)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Save(sample(fmt.Sprintf("c%d", i)))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Unsynced(); got != n {
		t.Fatalf("Unsynced() = %d, want %d", got, n)
	}
	release()
	flush(t, s)
	if got, want := log.all(), []syncCall{{records: n}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("group commits = %+v, want %+v", got, want)
	}

	// A later save starts a new round by itself.
	if err := s.Save(sample("late")); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	if got, want := log.all(), []syncCall{{records: n}, {records: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("group commits = %+v, want %+v", got, want)
	}
}

// SyncEach fsyncs before Save returns: nothing is left for a background
// group commit, none runs. SaveBuffered never schedules one either.
func TestSyncEachAndSaveBufferedScheduleNoGroupCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode SyncMode
		save func(*Store, *Record) error
	}{
		{"Save with SyncEach", SyncEach, (*Store).Save},
		{"SaveBuffered", SyncBackground, (*Store).SaveBuffered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &syncLog{}
			s, err := OpenStore(t.TempDir(), Options{Sync: tc.mode, OnSync: log.onSync})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.save(s, sample("c1")); err != nil {
				t.Fatal(err)
			}
			if n := s.Unsynced(); n != 0 {
				t.Fatalf("Unsynced() = %d", n)
			}
			s.sync.mu.Lock()
			running := s.sync.running
			s.sync.mu.Unlock()
			if running {
				t.Fatal("a group commit was started")
			}
			flush(t, s)
			if got := log.all(); len(got) != 0 {
				t.Fatalf("group commits = %+v, want none", got)
			}
			if _, err := s.Load("c1"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Flush waits for the pending group commit and gives up when its context
// ends.
func TestFlushWaitsForGroupCommit(t *testing.T) {
	log := &syncLog{}
	s, release := heldStore(t, t.TempDir(), log)
	if err := s.Save(sample("c1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush with the group commit held and a cancelled context: %v, want context.Canceled", err)
	}
	release()
	flush(t, s)
	if got := log.all(); len(got) != 1 || got[0].records != 1 || got[0].err != nil {
		t.Fatalf("group commits = %+v, want one of one record", got)
	}
}

func TestParseSyncMode(t *testing.T) {
	for in, want := range map[string]SyncMode{"": SyncBackground, "background": SyncBackground, "each": SyncEach} {
		if got, err := ParseSyncMode(in); err != nil || got != want {
			t.Errorf("ParseSyncMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSyncMode("always"); err == nil {
		t.Error(`ParseSyncMode("always") succeeded`)
	}
}
