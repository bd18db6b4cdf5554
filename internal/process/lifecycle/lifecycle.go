// Package lifecycle runs a process's parts as components: started one
// after the other in the order listed, and stopped in the reverse order
// when the process is told to stop or when one of them fails. A daemon's
// main function becomes the list of its components; the order of the list
// is its shutdown order, read backwards.
package lifecycle

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"
)

// Component is one part of a process with a lifetime. Every field but Name
// is optional.
type Component struct {
	// Name names the component in logs ("CNI server").
	Name string
	// Start starts the component and returns once it is started (a socket
	// bound, a cache primed); it must not block for the component's
	// lifetime. ctx is the component's lifetime: it ends when the
	// component is stopped, so goroutines Start leaves running may use it.
	// An error stops the components started before, in reverse order, and
	// is Run's error, as returned (wrap it with context in Start).
	Start func(ctx context.Context) error
	// Run is the component's work, run in a goroutine of its own after
	// Start with the same ctx. It returns nil when ctx ends (or when Stop
	// makes it return). A non-nil error stops the process: every component
	// is stopped, and Run returns the first such error (wrap it in Run).
	// Returning nil early (work done) stops nothing.
	Run func(ctx context.Context) error
	// Stop stops the component when its turn comes: after its lifetime
	// context is canceled, before Run's end is awaited. ctx bounds the
	// whole shutdown (Group.StopTimeout). An error is logged, not
	// returned: the next component is stopped regardless.
	Stop func(ctx context.Context) error
}

// Group is an ordered list of components.
type Group struct {
	// Components, in start order; they stop in the reverse order.
	Components []Component
	// StopTimeout bounds the whole shutdown: each Stop gets what is left
	// of it, and a Run still running when it is spent is left behind.
	// 0: no bound.
	StopTimeout time.Duration
}

// started is a component that has started: how to end its lifetime and
// where its Run reports.
type started struct {
	Component
	cancel context.CancelFunc
	done   chan struct{}
}

// Run starts the components in order, runs until ctx ends or a component's
// Run fails, then stops the started components in reverse order. It returns
// nil after a shutdown asked for by ctx; the error of a Start (the
// components after it never start), or the first error of a Run.
// Components' contexts keep ctx's values but not its cancellation: each is
// canceled at its component's turn to stop.
func (g Group) Run(ctx context.Context) error {
	failed := make(chan error, len(g.Components))
	var up []*started
	var err error
	for _, c := range g.Components {
		var s *started
		if s, err = start(ctx, c, failed); err != nil {
			break
		}
		up = append(up, s)
	}
	if err == nil {
		select {
		case <-ctx.Done():
		case err = <-failed:
		}
	}
	g.stop(ctx, up)
	if err == nil {
		// A Run that failed while the components were stopping.
		select {
		case err = <-failed:
		default:
		}
	}
	return err
}

// start starts c with a lifetime of its own, under base's values, and
// launches its Run, whose error goes to failed.
func start(base context.Context, c Component, failed chan<- error) (*started, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(base))
	s := &started{Component: c, cancel: cancel, done: make(chan struct{})}
	if c.Start != nil {
		if err := c.Start(ctx); err != nil {
			cancel()
			return nil, err
		}
	}
	klog.FromContext(base).V(2).Info("component started", "component", c.Name)
	if c.Run == nil {
		close(s.done)
		return s, nil
	}
	go func() {
		defer close(s.done)
		if err := c.Run(ctx); err != nil {
			failed <- err
		}
	}()
	return s, nil
}

// stop stops up in reverse order within g.StopTimeout: each component's
// lifetime is canceled, its Stop called, its Run awaited.
func (g Group) stop(base context.Context, up []*started) {
	ctx := context.WithoutCancel(base)
	if g.StopTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.StopTimeout)
		defer cancel()
	}
	log := klog.FromContext(base)
	for i := len(up) - 1; i >= 0; i-- {
		s := up[i]
		s.cancel()
		if s.Stop != nil {
			if err := s.Stop(ctx); err != nil {
				log.Error(err, "stopping", "component", s.Name)
			}
		}
		select {
		case <-s.done:
		case <-ctx.Done():
			log.Error(errors.New("shutdown timed out"), "not waiting for the component to end", "component", s.Name)
		}
	}
}
