package cniserver

import (
	"context"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// Engine performs CNI operations on decoded requests (multinetd's
// attach.Engine): the Handler contract, with the wire request decoded once
// by cnirequest.Decode. A request whose Invalid is set is the engine's to
// answer (an ADD tears down an earlier ADD of its container first).
type Engine interface {
	Add(ctx context.Context, req *cnirequest.Request) ([]byte, error)
	Del(ctx context.Context, req *cnirequest.Request) error
	Check(ctx context.Context, req *cnirequest.Request) error
	GC(ctx context.Context, req *cnirequest.Request) error
	Status(ctx context.Context, req *cnirequest.Request) error
}

// Decoding returns the Handler that decodes each wire request once, at the
// server's edge, and runs it through e.
func Decoding(e Engine) Handler { return decoding{e} }

type decoding struct{ e Engine }

func (d decoding) Add(ctx context.Context, req *api.Request) ([]byte, error) {
	return d.e.Add(ctx, cnirequest.Decode(req))
}

func (d decoding) Del(ctx context.Context, req *api.Request) error {
	return d.e.Del(ctx, cnirequest.Decode(req))
}

func (d decoding) Check(ctx context.Context, req *api.Request) error {
	return d.e.Check(ctx, cnirequest.Decode(req))
}

func (d decoding) GC(ctx context.Context, req *api.Request) error {
	return d.e.GC(ctx, cnirequest.Decode(req))
}

func (d decoding) Status(ctx context.Context, req *api.Request) error {
	return d.e.Status(ctx, cnirequest.Decode(req))
}
