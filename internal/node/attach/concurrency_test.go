package attach

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// §7.3: one operation per container at a time. A DEL that arrives while the
// container's ADD runs waits for it and then tears everything down; it never
// runs a delegate concurrently with the ADD.
func TestSameContainerSerializes(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.exec.before = func(c call) {
		if c.Command == "ADD" && c.IfName == "eth0" {
			once.Do(func() { close(started) })
			<-release
		}
	}
	addErr, delErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
		addErr <- err
	}()
	<-started
	go func() { delErr <- e.eng.Del(context.Background(), e.req(api.CmdDel, id, pod)) }()
	time.Sleep(300 * time.Millisecond)
	if dels := e.exec.of("DEL"); len(dels) != 0 {
		t.Errorf("DEL ran delegates %+v while the ADD of the same container was running", dels)
	}
	close(release)
	if err := <-addErr; err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if err := <-delErr; err != nil {
		t.Fatalf("DEL: %v", err)
	}
	calls := e.exec.of("")
	lastAdd, firstDel := -1, len(calls)
	for i, c := range calls {
		if c.Command == "ADD" {
			lastAdd = i
		}
		if c.Command == "DEL" && i < firstDel {
			firstDel = i
		}
	}
	if lastAdd > firstDel {
		t.Errorf("delegate calls interleave: %+v", calls)
	}
	e.wantLinks()
	e.wantLeases(e.defaultNet, 0)
	e.wantLeases("net-a", 0)
	if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after ADD then DEL: %v, want ErrNotFound", err)
	}
}

// §7.3: operations on different containers run in parallel: the ADD of one
// container waits, inside its delegate, for the other's delegate to start.
// Serialized, this would never happen.
func TestDifferentContainersRunInParallel(t *testing.T) {
	e := newEnv(t, nil)
	a, b := "ctr-a-"+cnitest.UniqueName(""), "ctr-b-"+cnitest.UniqueName("")
	bStarted := make(chan struct{})
	var once sync.Once
	var waited error
	e.exec.before = func(c call) {
		switch {
		case c.Command == "ADD" && c.ContainerID == b:
			once.Do(func() { close(bStarted) })
		case c.Command == "ADD" && c.ContainerID == a:
			select {
			case <-bStarted:
			case <-time.After(20 * time.Second):
				waited = errors.New("the other container's ADD never started while this one ran")
			}
		}
	}
	nsB := cnitest.NewNS(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, id := range []string{a, b} {
		req := e.req(api.CmdAdd, id, e.pod(nil))
		if id == b {
			req.Netns = nsB.Path()
		}
		wg.Go(func() { _, errs[i] = e.eng.Add(context.Background(), req) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if waited != nil {
		t.Fatal(waited)
	}
	e.wantLeases(e.defaultNet, 2)
}

// An operation that cannot get its container's lock before its deadline
// gives up with "try again later" (11) instead of running concurrently.
func TestLockDeadline(t *testing.T) {
	e := newEnv(t, nil)
	id := "ctr-" + cnitest.UniqueName("")
	unlock, err := e.eng.locks.Lock(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = e.eng.Del(ctx, e.req(api.CmdDel, id, nil))
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, id) {
		t.Fatalf("DEL while locked = %v, want code %d naming the container", err, types.ErrTryAgainLater)
	}
	if calls := e.exec.of(""); len(calls) != 0 {
		t.Errorf("delegates ran without the lock: %+v", calls)
	}
	unlock()
	// The abandoned waiter hands the lock back; then the key is free again.
	deadline := time.Now().Add(5 * time.Second)
	for {

		n := e.eng.locks.Len()

		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock table still has %d entries", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.del(id, nil)
}

// Many containers ADDed and DELed at once (run with -race): every one gets
// its interfaces and every address is released afterwards.
func TestConcurrentAddDel(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		netns := cnitest.NewNS(t)
		pod := e.podWithNetworks("net-a")
		id := "ctr-" + cnitest.UniqueName("")
		wg.Go(func() {
			add := e.req(api.CmdAdd, id, pod)
			add.Netns = netns.Path()
			if _, err := e.eng.Add(context.Background(), add); err != nil {
				errs[i] = err
				return
			}
			del := e.req(api.CmdDel, id, pod)
			del.Netns = netns.Path()
			errs[i] = e.eng.Del(context.Background(), del)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	e.wantLeases(e.defaultNet, 0)
	e.wantLeases("net-a", 0)
	if ids, err := e.store.List(); err != nil || len(ids) != 0 {
		t.Errorf("records left: %q, %v", ids, err)
	}
}

// BenchmarkAddDel is one pod's ADD and DEL with the default network and two
// bridge attachments, real plugins, in one netns.
func BenchmarkAddDel(b *testing.B) {
	e := newEnv(b, nil)
	e.bridgeNAD("net-a")
	e.bridgeNAD("net-b")
	pod := e.podWithNetworks("net-a,net-b")
	id := "ctr-" + cnitest.UniqueName("")
	for b.Loop() {
		e.add(id, pod)
		e.del(id, pod)
	}
}
