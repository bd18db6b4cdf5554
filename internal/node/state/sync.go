package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/multinet/multinet/internal/process/atomicfile"
)

// SyncMode says when Save makes a record durable (docs/decisions/state.md
// "Group commit").
type SyncMode string

const (
	// SyncBackground (the default, also for ""): Save returns once the
	// record is renamed into place, complete and readable; a background
	// syncer then fsyncs it and the directory, batching every record saved
	// in the meantime into one round (group commit). The window in which a
	// power loss can lose or empty a saved record is the time to the end of
	// the syncer's next round: it starts at once, and takes one round of
	// fsyncs (a few ms on a VM disk, docs/bench.md).
	SyncBackground SyncMode = "background"
	// SyncEach: Save fsyncs the file and the directory before it returns
	// (about 2–3 ms per save on a VM disk).
	SyncEach SyncMode = "each"
)

// Options configure a Store (OpenStore). The zero value is the default.
type Options struct {
	// Sync is SyncBackground ("" too) or SyncEach.
	Sync SyncMode
	// OnSync, when set, is called after each background group commit with
	// the number of records it made durable and its error (nil on
	// success; else the first failed fsync, and the records of the round
	// may not survive a power loss). Called from the syncer's goroutine;
	// must not call the Store.
	OnSync func(records int, err error)
	// BeforeGroupCommit, when set, runs in the syncer before each round
	// takes its batch; a test holds the group commit with it (to see a
	// record before it is durable, or a batch form).
	BeforeGroupCommit func()
}

// ParseSyncMode returns the SyncMode named s ("" is SyncBackground).
// Errors: any other name.
func ParseSyncMode(s string) (SyncMode, error) {
	switch SyncMode(s) {
	case "", SyncBackground:
		return SyncBackground, nil
	case SyncEach:
		return SyncEach, nil
	}
	return "", fmt.Errorf("record sync mode %q: want %q or %q", s, SyncBackground, SyncEach)
}

// maxParallelFsyncs bounds the fsyncs one group commit runs at once. On ext4
// concurrent fsyncs join one journal commit, so a round of many records
// costs little more than a round of one.
const maxParallelFsyncs = 8

// syncer is a Store's background group commit: the records saved (renamed)
// and not yet fsynced, and whether a goroutine is syncing them. The
// goroutine runs only while there is something to sync, so an idle Store
// holds none and needs no Close.
type syncer struct {
	mu      sync.Mutex
	dirty   map[string]struct{} // container IDs saved since the last round began
	running bool
	// idle is closed when the goroutine ends with nothing left to sync;
	// nil while none runs.
	idle chan struct{}
}

// mark adds container id to the next group commit and starts the syncer
// when it does not run.
func (y *syncer) mark(s *Store, id string) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.dirty == nil {
		y.dirty = map[string]struct{}{}
	}
	y.dirty[id] = struct{}{}
	if !y.running {
		y.running = true
		y.idle = make(chan struct{})
		go y.run(s)
	}
}

// run does group commits until nothing is left to sync: each round takes
// every record marked so far; records saved while it fsyncs go to the next.
func (y *syncer) run(s *Store) {
	for {
		if h := s.opts.BeforeGroupCommit; h != nil {
			h()
		}
		y.mu.Lock()
		if len(y.dirty) == 0 {
			y.running = false
			close(y.idle)
			y.idle = nil
			y.mu.Unlock()
			return
		}
		batch := y.dirty
		y.dirty = nil
		y.mu.Unlock()

		err := s.syncRecords(batch)
		if s.opts.OnSync != nil {
			s.opts.OnSync(len(batch), err)
		}
	}
}

// syncRecords fsyncs the record files of ids (those since removed are
// skipped: the directory's fsync makes the removal durable), up to
// maxParallelFsyncs at once, then the directory. Errors: the first fsync
// that failed.
func (s *Store) syncRecords(ids map[string]struct{}) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, maxParallelFsyncs)
	)
	for id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fsyncFile(filepath.Join(s.dir, id+".json")); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := fsyncFile(s.dir); err != nil && first == nil {
		first = err
	}
	return first
}

// fsyncFile fsyncs the file or directory at path; a missing path is not an
// error.
func fsyncFile(path string) error {
	err := atomicfile.Sync(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("group commit: %w", err)
	}
	return nil
}

// Unsynced returns how many saved records wait for the background group
// commit (0 with SyncEach). A record being synced by the round in progress
// is not counted.
func (s *Store) Unsynced() int {
	s.sync.mu.Lock()
	defer s.sync.mu.Unlock()
	return len(s.sync.dirty)
}

// Flush waits until the background syncer is idle: every record saved so
// far is durable (it does not sync anything itself; saves made meanwhile
// extend the wait). multinetd calls it when it shuts down.
// Errors: ctx ended first (its error).
func (s *Store) Flush(ctx context.Context) error {
	s.sync.mu.Lock()
	idle := s.sync.idle
	s.sync.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flush records in %s: %w", s.dir, ctx.Err())
	}
}
