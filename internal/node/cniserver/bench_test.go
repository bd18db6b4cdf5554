package cniserver

import (
	"context"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// BenchmarkRoundTrip measures one ADD through a real unix socket to a stub
// handler: connect, encode, server read/decode/dispatch, response, decode.
func BenchmarkRoundTrip(b *testing.B) {
	path, _ := start(b, &stub{result: []byte(testResult)}, Options{})
	req := request(api.CmdAdd)
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := api.Dial(ctx, path, req)
		cancel()
		if err != nil || resp.Error != nil {
			b.Fatalf("ADD: %v %v", err, resp)
		}
	}
}

// BenchmarkRoundTripParallel is BenchmarkRoundTrip from GOMAXPROCS clients
// at once, under the default concurrency bound.
func BenchmarkRoundTripParallel(b *testing.B) {
	path, _ := start(b, &stub{result: []byte(testResult)}, Options{})
	req := request(api.CmdAdd)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := api.Dial(ctx, path, req)
			cancel()
			if err != nil || resp.Error != nil {
				b.Errorf("ADD: %v %v", err, resp)
				return
			}
		}
	})
}
