// Package cniserver is the daemon side of the shim⇄daemon protocol
// (internal/node/cniserver/api): it listens on a unix socket, reads one CNI request per
// connection, runs it through a Handler with a deadline and a bound on
// concurrency, and writes the result or the CNI error back.
//
// Concurrency is counted in slots: ADD takes one of MaxInFlight, every other
// command one of MaxInFlight+ReservedInFlight, so that ADDs (which run
// delegates that may hang until their timeout) never take the capacity DEL,
// CHECK, GC and STATUS need. A handler that waits for something other than
// work of its own (another request on the same container, a delegate that
// does not answer) gives its slot back meanwhile (cnirequest.Yield).
//
// It does not import Prometheus: metrics plug in through Observer.
package cniserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// Handler performs CNI operations for the server. Each method gets a context
// that ends at the request's deadline, when the client hangs up, or on a
// forced Shutdown. A returned *types.Error (also when wrapped) reaches the
// runtime with its code, msg and details; any other error is reported with
// code 999 (types.ErrInternal) and err.Error() as msg.
type Handler interface {
	// Add performs CNI ADD and returns the CNI result JSON in the cniVersion
	// of req.Config; it is passed to the runtime verbatim (modulo JSON
	// whitespace).
	Add(ctx context.Context, req *api.Request) ([]byte, error)
	// Del performs CNI DEL.
	Del(ctx context.Context, req *api.Request) error
	// Check performs CNI CHECK.
	Check(ctx context.Context, req *api.Request) error
	// GC performs CNI GC (req.Config carries cni.dev/valid-attachments).
	GC(ctx context.Context, req *api.Request) error
	// Status performs CNI STATUS: nil when ADD can be served, else a
	// *types.Error with code 50 or 51 (CNI spec "STATUS").
	Status(ctx context.Context, req *api.Request) error
}

// Observer receives one OnStart and one OnDone per request that reached the
// server (connections closed before sending a byte are not reported). It is
// called synchronously from the connection's goroutine and must be cheap and
// safe for concurrent use (e.g. Prometheus counters and histograms).
type Observer interface {
	// OnStart is called when a request has been read, before it waits for a
	// slot. command is a CNI command, or "INVALID" for a malformed request.
	OnStart(command string)
	// OnDone is called when the response is ready, just before it is
	// written (so a client that got its answer finds it counted).
	// read is the time from the connection's accept to its request read
	// and decoded (the client's send and this goroutine's scheduling
	// included), queued the time spent waiting for a concurrency slot
	// (before the handler ran, and to take one again after a Yield), ran
	// the handler's run time; err is the CNI error sent to the client, nil
	// on success.
	OnDone(command string, read, queued, ran time.Duration, err *types.Error)
}

// CommandInvalid is the command an Observer sees for a request that could
// not be read or decoded.
const CommandInvalid = "INVALID"

// Defaults for Options fields left zero.
const (
	DefaultMaxInFlight      = 16
	DefaultReservedInFlight = 4
	DefaultMaxConns         = 256
	DefaultReadTimeout      = 10 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultRequestTimeout   = 110 * time.Second
)

// Options tunes a Server. Zero values take the Default* constants.
type Options struct {
	// MaxInFlight bounds the ADDs run by the Handler at once, and is the
	// part of the slots any command may use. Further requests wait for a
	// slot until their deadline, then fail with code 11 (try again later).
	MaxInFlight int
	// ReservedInFlight are further slots only DEL, CHECK, GC and STATUS
	// use: however many ADDs hang in their delegates, these run. At most
	// MaxInFlight+ReservedInFlight requests run at once.
	ReservedInFlight int
	// MaxConns bounds open connections (reading, queued, running, writing);
	// beyond it the server stops accepting and clients wait in the listen
	// backlog, bounded by their own timeout.
	MaxConns int
	// ReadTimeout bounds reading one request from a connection.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response.
	WriteTimeout time.Duration
	// RequestTimeout bounds one request from the moment it was read
	// (queueing + handling). A client that announces a shorter timeout
	// (api.Request.TimeoutMillis) shortens it, leaving a margin to answer.
	RequestTimeout time.Duration
	// Observer, if set, is told about every request (metrics); one that
	// also implements PeerObserver is told about refused peers.
	Observer Observer
	// PeerUIDs are the user ids of the processes served, checked on each
	// connection with SO_PEERCRED; empty: DefaultPeerUIDs (root only).
	// Any other peer gets a CNI error (code 999) naming its uid and is
	// logged; its request never reaches the Handler.
	PeerUIDs []uint32
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("cniserver: server closed")

// Server serves the shim⇄daemon protocol. Create it with New.
type Server struct {
	h    Handler
	opts Options

	addSlots chan struct{} // MaxInFlight: taken by ADD, before one of slots
	slots    chan struct{} // MaxInFlight+ReservedInFlight: taken by every request
	conns    chan struct{} // MaxConns

	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu        sync.Mutex
	closing   bool
	done      chan struct{}
	listeners map[net.Listener]struct{}
	active    map[net.Conn]struct{}
	wg        sync.WaitGroup // one per active connection
}

// New returns a Server that runs requests through h.
func New(h Handler, opts Options) *Server {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.ReservedInFlight <= 0 {
		opts.ReservedInFlight = DefaultReservedInFlight
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MaxConns < opts.MaxInFlight+opts.ReservedInFlight {
		opts.MaxConns = opts.MaxInFlight + opts.ReservedInFlight
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if len(opts.PeerUIDs) == 0 {
		opts.PeerUIDs = DefaultPeerUIDs
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		h:          h,
		opts:       opts,
		addSlots:   make(chan struct{}, opts.MaxInFlight),
		slots:      make(chan struct{}, opts.MaxInFlight+opts.ReservedInFlight),
		conns:      make(chan struct{}, opts.MaxConns),
		baseCtx:    ctx,
		cancelBase: cancel,
		done:       make(chan struct{}),
		listeners:  map[net.Listener]struct{}{},
		active:     map[net.Conn]struct{}{},
	}
}

// Serve accepts connections on l until Shutdown, serving each in its own
// goroutine. It closes l on return and returns ErrServerClosed after
// Shutdown, or the listener's error.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		_ = l.Close()
	}()

	var backoff time.Duration
	for {
		select {
		case s.conns <- struct{}{}:
		case <-s.done:
			return ErrServerClosed
		}
		conn, err := l.Accept()
		if err != nil {
			<-s.conns
			if s.isClosing() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				klog.ErrorS(err, "Accepting CNI connection failed; retrying", "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-s.done:
					return ErrServerClosed
				}
				continue
			}
			return fmt.Errorf("accepting CNI connection: %w", err)
		}
		backoff = 0
		if !s.track(conn) {
			_ = conn.Close()
			<-s.conns
			return ErrServerClosed
		}
		go func() {
			defer func() {
				s.untrack(conn)
				<-s.conns
			}()
			s.serveConn(conn)
		}()
	}
}

// Shutdown stops accepting, then waits for open connections to be answered.
// If ctx ends first, it cancels the handlers' contexts, closes the remaining
// connections and returns ctx.Err(). Serve returns ErrServerClosed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.done)
	}
	for l := range s.listeners {
		_ = l.Close()
	}
	s.mu.Unlock()

	idle := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(idle)
	}()
	select {
	case <-idle:
		s.cancelBase()
		return nil
	case <-ctx.Done():
	}
	s.cancelBase()
	s.mu.Lock()
	for c := range s.active {
		_ = c.Close()
	}
	s.mu.Unlock()
	return fmt.Errorf("cniserver shutdown: %w", ctx.Err())
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.active[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.active, c)
	s.mu.Unlock()
	_ = c.Close()
	s.wg.Done()
}

// errClientGone is the cancellation cause when the client hangs up before
// its response was written.
var errClientGone = errors.New("client closed the connection")

// deadlineError is the cancellation cause at a request's deadline (d after
// it was read): a context.DeadlineExceeded that says which deadline passed.
type deadlineError time.Duration

func (d deadlineError) Error() string {
	return fmt.Sprintf("the request's deadline (%s) passed", time.Duration(d))
}

func (deadlineError) Unwrap() error { return context.DeadlineExceeded }

// serveConn handles one connection: read, queue, handle, write.
func (s *Server) serveConn(conn net.Conn) {
	accepted := time.Now()
	_ = conn.SetReadDeadline(accepted.Add(s.opts.ReadTimeout))
	cr := &countingReader{r: conn}
	peerErr := checkPeer(conn, s.opts.PeerUIDs)
	req, err := api.ReadRequest(cr)
	if peerErr != nil {
		// The request is read (bounded by ReadTimeout) only so that the
		// client, which writes it before reading, gets the refusal.
		s.refusePeer(conn, peerErr)
		return
	}
	if err != nil {
		if cr.n == 0 && errors.Is(err, io.EOF) {
			return // connected and left (e.g. a liveness probe)
		}
		code := types.ErrDecodingFailure
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
			code = types.ErrIOFailure
		}
		cerr := types.NewError(code, "multinetd: invalid request", err.Error())
		klog.ErrorS(err, "Rejecting CNI request", "code", code)
		s.observeStart(CommandInvalid)
		frame, resp := encode(&api.Response{V: api.Version, Error: cerr})
		s.observeDone(CommandInvalid, time.Since(accepted), 0, 0, resp.Error)
		s.write(conn, frame)
		return
	}
	read := time.Now()
	s.observeStart(req.Command)

	ctx, cancel := context.WithCancelCause(s.baseCtx)
	defer cancel(nil)
	d := s.deadline(req)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, d, deadlineError(d))
	defer cancelTimeout()

	// The client sends nothing after its request; a read returning means it
	// hung up (or broke the protocol): nobody waits for the answer anymore.
	_ = conn.SetReadDeadline(time.Time{})
	go func() {
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel(errClientGone)
	}()

	resp, queued, ran := s.run(ctx, req, read)
	frame, resp := encode(resp)
	s.observeDone(req.Command, read.Sub(accepted), queued, ran, resp.Error)
	s.write(conn, frame)
}

// refusePeer answers a connection whose peer is not served: a CNI error
// naming the peer's uid, a log line and the Observer's OnPeerRefused.
func (s *Server) refusePeer(conn net.Conn, err error) {
	klog.ErrorS(err, "Refusing CNI connection: peer not allowed", "socket", conn.LocalAddr().String())
	if po, ok := s.opts.Observer.(PeerObserver); ok {
		po.OnPeerRefused(peerUID(err))
	}
	frame, _ := encode(api.ErrorResponse(types.ErrInternal, "multinetd: connection refused", err.Error()))
	s.write(conn, frame)
}

// deadline returns how long req may take from now: RequestTimeout, shortened
// to leave a margin inside the client's own timeout.
func (s *Server) deadline(req *api.Request) time.Duration {
	d := s.opts.RequestTimeout
	if ct := req.Timeout(); ct > 0 {
		margin := min(ct/10, time.Second)
		if ct-margin < d {
			d = ct - margin
		}
	}
	return d
}

// run waits for a slot and runs the handler; it always returns a Response.
func (s *Server) run(ctx context.Context, req *api.Request, read time.Time) (resp *api.Response, queued, ran time.Duration) {
	sl := &slot{s: s, add: req.Command == api.CmdAdd}
	if err := sl.acquire(ctx); err != nil {
		queued = time.Since(read)
		return api.ErrorResponse(types.ErrTryAgainLater,
			fmt.Sprintf("multinetd busy: %s waited %s for one of %d slots", req.Command, queued.Round(time.Millisecond), sl.capacity()),
			context.Cause(ctx).Error()), queued, 0
	}
	defer sl.release()
	start := time.Now()
	resp = s.call(cnirequest.WithSlot(ctx, sl), req)
	ran = time.Since(start)
	queued = start.Sub(read) + sl.waited()
	if resp.Error != nil {
		klog.V(2).InfoS("CNI request failed", "command", req.Command, "containerID", req.ContainerID,
			"ifName", req.IfName, "code", resp.Error.Code, "msg", resp.Error.Msg, "duration", ran)
	} else {
		klog.V(4).InfoS("CNI request done", "command", req.Command, "containerID", req.ContainerID,
			"ifName", req.IfName, "duration", ran)
	}
	return resp, queued, ran
}

// slot is one request's hold on the server's concurrency: an ADD holds one
// of addSlots and one of slots, any other command one of slots. It is given
// back and taken again by Yield (cnirequest.Yield).
type slot struct {
	s   *Server
	add bool

	mu     sync.Mutex
	held   bool
	rewait time.Duration // waits to take it again after a Yield
}

// capacity is the number of slots the request's command may use.
func (sl *slot) capacity() int {
	if sl.add {
		return cap(sl.s.addSlots)
	}
	return cap(sl.s.slots)
}

// acquire takes the slot, waiting until ctx ends (then an error, and the
// slot is not held). Taking a held slot does nothing.
func (sl *slot) acquire(ctx context.Context) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.held {
		return nil
	}
	if sl.add {
		select {
		case sl.s.addSlots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	select {
	case sl.s.slots <- struct{}{}:
	case <-ctx.Done():
		if sl.add {
			<-sl.s.addSlots
		}
		return context.Cause(ctx)
	}
	sl.held = true
	return nil
}

// release gives the slot back and reports whether it was held.
func (sl *slot) release() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.held {
		return false
	}
	<-sl.s.slots
	if sl.add {
		<-sl.s.addSlots
	}
	sl.held = false
	return true
}

func (sl *slot) waited() time.Duration {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.rewait
}

// Yield gives the slot back (cnirequest.Slot, which handlers reach through
// cnirequest.Yield) and returns resume, which takes one again, waiting
// until waitCtx ends. A slot not held yields nothing.
func (sl *slot) Yield() (resume func(waitCtx context.Context) error) {
	if !sl.release() {
		return func(context.Context) error { return nil }
	}
	return func(waitCtx context.Context) error {
		start := time.Now()
		err := sl.acquire(waitCtx)
		sl.mu.Lock()
		sl.rewait += time.Since(start)
		sl.mu.Unlock()
		if err != nil {
			return fmt.Errorf("waiting for one of %d concurrency slots again: %w", sl.capacity(), err)
		}
		return nil
	}
}

// call dispatches to the handler, converting errors and panics to CNI errors.
func (s *Server) call(ctx context.Context, req *api.Request) (resp *api.Response) {
	defer func() {
		if p := recover(); p != nil {
			klog.ErrorS(fmt.Errorf("%v", p), "CNI handler panicked", "command", req.Command,
				"containerID", req.ContainerID, "stack", string(debug.Stack()))
			resp = api.ErrorResponse(types.ErrInternal, fmt.Sprintf("multinetd: %s handler panicked: %v", req.Command, p), "")
		}
	}()
	var (
		result []byte
		err    error
	)
	switch req.Command {
	case api.CmdAdd:
		result, err = s.h.Add(ctx, req)
		if err == nil && len(result) == 0 {
			err = errors.New("multinetd: ADD handler returned no result")
		}
	case api.CmdDel:
		err = s.h.Del(ctx, req)
	case api.CmdCheck:
		err = s.h.Check(ctx, req)
	case api.CmdGC:
		err = s.h.GC(ctx, req)
	case api.CmdStatus:
		err = s.h.Status(ctx, req)
	default: // api.DecodeRequest rejects unknown commands
		err = types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND %q", req.Command), "")
	}
	if err != nil {
		return &api.Response{V: api.Version, Error: toCNIError(ctx, req.Command, err)}
	}
	return &api.Response{V: api.Version, Result: result}
}

// toCNIError returns err's *types.Error; an error caused by the request's
// deadline becomes code 11 (try again later: the runtime retries a timed-out
// sandbox); any other error becomes code 999 with err.Error() as msg.
func toCNIError(ctx context.Context, cmd string, err error) *types.Error {
	var cerr *types.Error
	if errors.As(err, &cerr) {
		return cerr
	}
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("multinetd: %s timed out", cmd), err.Error())
	}
	return types.NewError(types.ErrInternal, err.Error(), "")
}

// encode returns the frame of resp and the response it carries: a response
// that cannot be encoded (result over api.MaxResponseSize, invalid JSON) is
// replaced by a code 999 error.
func encode(resp *api.Response) ([]byte, *api.Response) {
	frame, err := api.EncodeResponse(resp)
	if err == nil {
		return frame, resp
	}
	klog.ErrorS(err, "Encoding CNI response failed")
	resp = api.ErrorResponse(types.ErrInternal, "multinetd: cannot encode response", err.Error())
	frame, err = api.EncodeResponse(resp)
	if err != nil { // not reached: a short error always encodes
		klog.ErrorS(err, "Encoding CNI error response failed")
	}
	return frame, resp
}

// write sends a response frame within WriteTimeout.
func (s *Server) write(conn net.Conn, frame []byte) {
	if frame == nil {
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	if _, err := conn.Write(frame); err != nil {
		klog.V(2).InfoS("Writing CNI response failed", "err", err)
	}
}

func (s *Server) observeStart(cmd string) {
	if s.opts.Observer != nil {
		s.opts.Observer.OnStart(cmd)
	}
}

func (s *Server) observeDone(cmd string, read, queued, ran time.Duration, err *types.Error) {
	if s.opts.Observer != nil {
		s.opts.Observer.OnDone(cmd, read, queued, ran, err)
	}
}

// countingReader counts bytes read, to tell an empty connection from a
// truncated request.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
