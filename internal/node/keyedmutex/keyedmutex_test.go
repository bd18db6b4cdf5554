package keyedmutex

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// One holder per key: a second Lock waits and gives up at its deadline,
// naming the key; TryLock fails while the key is held or waited for; the
// table is empty once every holder and waiter is gone.
func TestOneHolderPerKey(t *testing.T) {
	var m Map
	unlock, err := m.Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.TryLock("c1"); ok {
		t.Error("TryLock of a held key succeeded")
	}
	other, ok := m.TryLock("c2")
	if !ok {
		t.Fatal("TryLock of a free key failed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(ctx, "c1"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "c1") {
		t.Errorf("Lock of a held key = %v, want the deadline, naming c1", err)
	}
	unlock()
	other()
	got, err := m.Lock(context.Background(), "c1") // the abandoned waiter handed it back
	if err != nil {
		t.Fatal(err)
	}
	got()
	for deadline := time.Now().Add(5 * time.Second); m.Len() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left, want none", m.Len())
		}
		time.Sleep(time.Millisecond)
	}
}
