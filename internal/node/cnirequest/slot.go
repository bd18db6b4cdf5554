package cnirequest

import "context"

// Slot is a request's hold on the server's concurrency (internal/node/cniserver
// counts requests in slots). Yield gives it back and returns resume, which
// takes one again, waiting until waitCtx ends; resume's error means the slot
// is not held. A Slot that is not held yields nothing (resume returns nil).
type Slot interface {
	Yield() (resume func(waitCtx context.Context) error)
}

type slotKey struct{}

// WithSlot returns ctx carrying the request's slot (the server sets it).
func WithSlot(ctx context.Context, s Slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// Yield gives back the concurrency slot of the request whose context is
// ctx, for a handler about to wait for something that is no work of its own:
// another request's operation on the same container, a delegate that has not
// answered for long. Other requests run in the meantime. It returns resume,
// which takes a slot again, waiting until waitCtx ends; resume's error (the
// context's cause) means the slot is not held, and the handler should give
// up. Without a slot in ctx (a handler called directly, or one that already
// yielded), Yield does nothing and resume returns nil. resume may be called
// from another goroutine than Yield, but not concurrently with another
// Yield of the same request.
func Yield(ctx context.Context) (resume func(waitCtx context.Context) error) {
	if s, ok := ctx.Value(slotKey{}).(Slot); ok && s != nil {
		return s.Yield()
	}
	return func(context.Context) error { return nil }
}
