package attach

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/cnirequest"
)

// A delegate that does not answer must cost the node neither its
// concurrency nor more time than its deadline : the
// delegate's exec gives the request's concurrency slot back after
// DelegateSlotTimeout and returns at the delegate's deadline even when the
// plugin's process tree does not let go of its output, and the teardown of a
// failed ADD has a deadline of its own.

// exitGrace is how long a stopped plugin's exec may take to return once
// the delegate's context ended (the plugin is killed then; a process it
// started may still hold its stdout open).
const exitGrace = 2 * time.Second

// timeoutCause is the cancellation cause of a context multinet bounds: what
// ran out, for the error message. It is a context.DeadlineExceeded.
type timeoutCause string

func (c timeoutCause) Error() string { return string(c) }
func (timeoutCause) Unwrap() error   { return context.DeadlineExceeded }

// delegateContext bounds one delegate invocation by timeout, named by
// what ("delegateTimeout") in the error when it runs out.
func delegateContext(ctx context.Context, timeout time.Duration, what string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, timeoutCause(fmt.Sprintf("no answer within %s (%s)", timeout.Round(time.Millisecond), what)))
}

// delegateErr is delegateError for an invocation that ran in dctx: when
// dctx ended (its timeout, the request's deadline, the teardown's time, the
// client gone) the error says so, with code 11 (try again later), whatever
// the killed plugin left on its way out.
func delegateErr(cmd, network, ifName string, list *libcniList, dctx context.Context, err error) error {
	if dctx.Err() == nil {
		return delegateError(cmd, network, ifName, list, err)
	}
	cause := context.Cause(dctx)
	verb := "timed out"
	if !errors.Is(cause, context.DeadlineExceeded) {
		verb = "stopped"
	}
	return types.NewError(types.ErrTryAgainLater,
		fmt.Sprintf("network %s (interface %s, plugin %s): %s %s: %v; the plugin was stopped", network, ifName, pluginTypes(list), cmd, verb, cause), "")
}

// teardownContext is the context of the teardown of a failed ADD's n
// attachments: not cancelled with the request (the teardown must run when
// the client gave up), but ending TeardownGrace per attachment after the
// request's deadline (or after now, when that has passed; without a
// deadline, after one DelegateTimeout). teardown shares it among the
// attachments.
func (e *Engine) teardownContext(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	now := time.Now()
	base, ok := ctx.Deadline()
	if !ok {
		base = now.Add(e.opts.DelegateTimeout)
	}
	if base.Before(now) {
		base = now
	}
	grace := time.Duration(max(n, 1)) * e.opts.TeardownGrace
	return context.WithDeadlineCause(context.WithoutCancel(ctx), base.Add(grace),
		timeoutCause(fmt.Sprintf("no time left to tear down the failed ADD (the request's deadline + teardownGrace %s × %d attachments)", e.opts.TeardownGrace, n)))
}

// guardedExec runs every delegate process of the engine through Exec.
type guardedExec struct {
	invoke.Exec
	// slotTimeout is how long a plugin may run holding its request's
	// concurrency slot (Options.DelegateSlotTimeout).
	slotTimeout time.Duration
}

// ExecPlugin runs the plugin. After slotTimeout it gives the request's
// concurrency slot back (cnirequest.Yield): a plugin that has not answered
// by then is waiting, not working, and must not keep other pods from being
// attached or deleted; the slot is taken again once it answers, within ctx.
// When ctx ends it returns within exitGrace: the plugin is killed by the
// Exec, and a process it started that still holds its output is left
// behind (logged) rather than holding the request past its deadline.
func (g *guardedExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := g.Exec.ExecPlugin(ctx, pluginPath, stdin, environ)
		done <- result{out, err}
	}()
	slow := time.NewTimer(g.slotTimeout)
	defer slow.Stop()
	var resume func(context.Context) error
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-slow.C:
			klog.FromContext(ctx).V(2).Info("delegate slow: giving its concurrency slot back until it answers", "plugin", pluginPath, "after", g.slotTimeout)
			resume = cnirequest.Yield(ctx)
		case <-ctx.Done():
			select {
			case r = <-done:
			case <-time.After(exitGrace):
				klog.FromContext(ctx).Info("delegate stopped but its exec has not returned (a process it started holds its output open); leaving it behind", "plugin", pluginPath)
				r = result{err: fmt.Errorf("plugin %s: stopped, and still running %s later: %w", pluginPath, exitGrace, context.Cause(ctx))}
			}
			// The request goes on to fail: it runs what is left (a
			// bounded teardown) without waiting for a slot again.
			return r.out, r.err
		}
	}
	if resume != nil {
		if err := resume(ctx); err != nil {
			klog.FromContext(ctx).V(2).Info("delegate answered; no concurrency slot free again before its deadline", "plugin", pluginPath, "err", err)
		}
	}
	return r.out, r.err
}
