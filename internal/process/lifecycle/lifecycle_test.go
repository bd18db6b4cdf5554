package lifecycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a log of what the components did, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// component records its start, the end of its lifetime as its Run sees
// it, and its stop; lives[name] is its lifetime context.
func component(r *recorder, name string, lives map[string]context.Context) Component {
	return Component{
		Name: name,
		Start: func(ctx context.Context) error {
			lives[name] = ctx
			r.add("start " + name)
			return nil
		},
		Run: func(ctx context.Context) error {
			<-ctx.Done()
			r.add("ended " + name)
			return nil
		},
		Stop: func(context.Context) error {
			r.add("stop " + name)
			return nil
		},
	}
}

func TestStopsInReverseOrderOfStart(t *testing.T) {
	var r recorder
	lives := map[string]context.Context{}
	a, b, c := component(&r, "a", lives), component(&r, "b", lives), component(&r, "c", lives)
	// While c stops, a and b still live.
	stopC := c.Stop
	c.Stop = func(ctx context.Context) error {
		if lives["a"].Err() != nil || lives["b"].Err() != nil {
			t.Error("a or b was canceled before c stopped")
		}
		if lives["c"].Err() == nil {
			t.Error("c's Stop was called before its lifetime ended")
		}
		return stopC(ctx)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Group{Components: []Component{a, b, c}}.Run(ctx) }()
	for len(r.get()) < 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"start a", "start b", "start c", "ended c", "stop c", "ended b", "stop b", "ended a", "stop a"}
	got := r.get()
	// A Run's end and its Stop race; the order between components does not.
	for i := 3; i < len(got); i += 2 {
		if got[i] > got[i+1] {
			got[i], got[i+1] = got[i+1], got[i]
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

func TestStartFailureStopsWhatStarted(t *testing.T) {
	var r recorder
	lives := map[string]context.Context{}
	boom := errors.New("socket: address in use")
	b := component(&r, "b", lives)
	b.Start = func(context.Context) error { return boom }
	err := Group{Components: []Component{component(&r, "a", lives), b, component(&r, "c", lives)}}.Run(context.Background())
	if err != boom {
		t.Errorf("Run: %v, want the Start error as returned", err)
	}
	got := r.get()
	slices.Sort(got[1:])
	if want := []string{"start a", "ended a", "stop a"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

func TestRunFailureStopsEveryComponent(t *testing.T) {
	var r recorder
	lives := map[string]context.Context{}
	boom := errors.New("CNI server: listener closed")
	b := component(&r, "b", lives)
	b.Run = func(context.Context) error { return boom }
	ctx := context.Background()
	err := Group{Components: []Component{component(&r, "a", lives), b, component(&r, "c", lives)}}.Run(ctx)
	if err != boom {
		t.Errorf("Run: %v, want the failed Run's error", err)
	}
	got := r.get()
	if i, j := slices.Index(got, "stop c"), slices.Index(got, "stop a"); i < 0 || j < i || !slices.Contains(got, "stop b") {
		t.Errorf("events %q: every component stops, c before a", got)
	}
}

func TestFailureWhileStoppingIsReturned(t *testing.T) {
	drain := errors.New("webhook server: drain failed")
	c := Component{Name: "server", Run: func(ctx context.Context) error {
		<-ctx.Done()
		return drain
	}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (Group{Components: []Component{c}}).Run(ctx); err != drain {
		t.Errorf("Run: %v, want the error of the Run that failed while stopping", err)
	}
}

func TestStopTimeoutLeavesAStuckComponent(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	var stopped bool
	g := Group{StopTimeout: 10 * time.Millisecond, Components: []Component{
		{Name: "first", Stop: func(context.Context) error { stopped = true; return nil }},
		{Name: "stuck", Run: func(context.Context) error { <-stuck; return nil }},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Run(ctx); err != nil {
		t.Errorf("Run: %v", err)
	}
	if !stopped {
		t.Error("the component before the stuck one was not stopped")
	}
}
