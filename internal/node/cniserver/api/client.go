package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// Dial sends req to the server listening on the unix socket socketPath and
// returns its Response. The whole exchange (connect, write, wait, read) is
// bounded by ctx: on expiry or cancellation the connection is closed and the
// error wraps ctx.Err(). When req.TimeoutMillis is 0 and ctx has a deadline,
// the remaining time is sent so that the server can answer before the client
// gives up.
//
// An error from Dial means no Response was received: the server may or may
// not have performed the operation. A received Response carrying a CNI error
// is not an error of Dial.
func Dial(ctx context.Context, socketPath string, req *Request) (*Response, error) {
	if req.TimeoutMillis == 0 {
		if dl, ok := ctx.Deadline(); ok {
			if ms := time.Until(dl).Milliseconds(); ms > 0 {
				r := *req
				r.TimeoutMillis = ms
				req = &r
			}
		}
	}
	frame, err := EncodeRequest(req)
	if err != nil {
		return nil, err
	}

	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", socketPath, ctxErr(ctx, err))
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return nil, fmt.Errorf("setting deadline on %s: %w", socketPath, err)
		}
	}
	// Cancellation without a deadline: unblock pending I/O at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	_, werr := conn.Write(frame)
	// Even if the write failed (the server may have rejected the request and
	// closed early), the server's answer may already be readable.
	resp, rerr := ReadResponse(conn)
	if rerr != nil {
		if werr != nil {
			return nil, fmt.Errorf("sending %s request to %s: %w", req.Command, socketPath, ctxErr(ctx, werr))
		}
		return nil, fmt.Errorf("waiting for %s response from %s: %w", req.Command, socketPath, ctxErr(ctx, rerr))
	}
	return resp, nil
}

// sendAgain says whether a request that got no answer (err) is sent again.
func sendAgain(cmd string, err error, waitForServer bool) bool {
	switch cmd {
	case CmdDel, CmdGC:
		return true
	case CmdAdd, CmdCheck:
		return waitForServer && notListening(err)
	}
	return false
}

// notListening: the connection was refused or the socket does not exist;
// the request was not delivered.
func notListening(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// ctxErr prefers the context's error when a deadline hit was caused by ctx,
// so that callers can test errors.Is(err, context.DeadlineExceeded).
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, cerr)) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

// Exchange is Dial, tried again for DEL and GC until ctx ends while no
// answer arrives (nothing listens on the socket, or the server died before
// answering: it is restarting). Runtimes send those once and do not repeat
// them (containerd cleans up after a failed ADD with one DEL and then
// forgets the sandbox), so failing at once would leave what they should
// release behind; both are safe to repeat (a CNI DEL of what is gone
// succeeds). An answer, even an error, ends it. ADD, CHECK and STATUS fail
// at once: the kubelet retries ADD with a new sandbox, and STATUS must say
// "not available" now. Used by multinet-shim and multinet-ipam.
func Exchange(ctx context.Context, socketPath string, req *Request) (*Response, error) {
	return exchange(ctx, socketPath, req, false)
}

// ExchangeWaiting is Exchange that also sends ADD and CHECK again until ctx
// ends while nothing listens on the socket (no socket file, or connection
// refused: multinetd is being replaced, as in a rolling upgrade of its
// DaemonSet). Such a request never reached the server, so sending it again
// cannot do anything twice; once connected, a lost answer still fails ADD
// and CHECK at once. STATUS fails at once.
func ExchangeWaiting(ctx context.Context, socketPath string, req *Request) (*Response, error) {
	return exchange(ctx, socketPath, req, true)
}

func exchange(ctx context.Context, socketPath string, req *Request, waitForServer bool) (*Response, error) {
	backoff := 100 * time.Millisecond
	for {
		resp, err := Dial(ctx, socketPath, req)
		if err == nil || ctx.Err() != nil || !sendAgain(req.Command, err, waitForServer) {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the server did not come back (%v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
