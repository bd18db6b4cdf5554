// Package keyedmutex serializes operations per key: multinetd's one
// operation per container at a time (multi-net spec §7.3: ADD, DEL, CHECK,
// GC, hot-plug and the network-status writes of one pod sandbox hold its
// container ID's lock), and one network-status PATCH per pod.
package keyedmutex

import (
	"context"
	"fmt"
	"sync"

	"github.com/multinet/multinet/internal/node/cnirequest"
)

// Map is a set of mutexes by key, each existing while someone holds or waits
// for it. Its zero value is ready; it is safe for concurrent use.
type Map struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int
}

// Lock locks key and returns its unlock function. It gives up when ctx ends
// (an error naming key and wrapping ctx's error). While it waits for another
// operation on key, the request gives its concurrency slot back
// (cnirequest.Yield): a request waiting for its container is no work, and
// must not keep others from running; it takes a slot again once it has the
// lock.
func (k *Map) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*entry{}
	}
	e, ok := k.m[key]
	if !ok {
		e = &entry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()

	release := func() {
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	if e.mu.TryLock() {
		return func() { e.mu.Unlock(); release() }, nil
	}
	resume := cnirequest.Yield(ctx)
	got := make(chan struct{})
	go func() {
		e.mu.Lock()
		close(got)
	}()
	select {
	case <-got:
		unlock := func() { e.mu.Unlock(); release() }
		if err := resume(ctx); err != nil {
			unlock()
			return nil, fmt.Errorf("container %s: after waiting for its earlier operation: %w", key, err)
		}
		return unlock, nil
	case <-ctx.Done():
		// The goroutine still takes the lock eventually; hand it back then.
		go func() { <-got; e.mu.Unlock(); release() }()
		return nil, fmt.Errorf("another operation on container %s is still running: %w", key, ctx.Err())
	}
}

// TryLock locks key when nobody holds or waits for it and returns its
// unlock function; ok is false (and nothing is locked) when someone does.
func (k *Map) TryLock(key string) (unlock func(), ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]*entry{}
	}
	if _, busy := k.m[key]; busy {
		return nil, false
	}
	e := &entry{}
	e.mu.Lock()
	e.refs = 1
	k.m[key] = e
	return func() {
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
		e.mu.Unlock()
	}, true
}

// Waiters is how many operations hold or wait for key.
func (k *Map) Waiters(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.m[key]; e != nil {
		return e.refs
	}
	return 0
}

// Len is how many keys someone holds or waits for.
func (k *Map) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
