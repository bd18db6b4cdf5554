package criruntime

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/testing/critest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func fixture(t *testing.T, name string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]string
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return info
}

// TestParseFixtures: the verbose Status info of each runtime
// (testdata/README.md says where each sample comes from) gives its CNI
// plugin dirs and conf dir; CRI-O's gives nothing, without an error.
func TestParseFixtures(t *testing.T) {
	for _, tt := range []struct {
		file string
		want CNI
	}{
		{"containerd-v2.4.2.json", CNI{BinDirs: []string{"/opt/cni/bin"}, ConfDir: "/etc/cni/net.d"}},
		{"containerd-v2.4.2-k3s.json", CNI{BinDirs: []string{"/var/lib/rancher/k3s/data/current/bin"}, ConfDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d"}},
		{"containerd-v1.7.29.json", CNI{BinDirs: []string{"/opt/cni/bin"}, ConfDir: "/etc/cni/net.d"}},
		{"cri-o-1.33.json", CNI{}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Parse(fixture(t, tt.file))
			if err != nil {
				t.Errorf("Parse: %v", err)
			}
			if !slices.Equal(got.BinDirs, tt.want.BinDirs) || got.ConfDir != tt.want.ConfDir {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestParseDefensive: whatever a runtime answers, Parse keeps only
// absolute clean paths and names what it left out.
func TestParseDefensive(t *testing.T) {
	many := make([]string, maxBinDirs+3)
	for i := range many {
		many[i] = "/opt/cni/bin" + strings.Repeat("x", i)
	}
	manyJSON, _ := json.Marshal(many)
	for _, tt := range []struct {
		name    string
		info    map[string]string
		want    CNI
		wantErr string
	}{
		{name: "nil", info: nil},
		{name: "nothing about CNI", info: map[string]string{"golang": `"go1.24"`, "config": `{"sandboxImage":"pause"}`}},
		{name: "containerd 2.0 binDir", info: map[string]string{"config": `{"cni":{"binDir":"/opt/cni/bin","confDir":"/etc/cni/net.d"}}`},
			want: CNI{BinDirs: []string{"/opt/cni/bin"}, ConfDir: "/etc/cni/net.d"}},
		{name: "binDirs win over binDir", info: map[string]string{"config": `{"cni":{"binDirs":["/a","/b"],"binDir":"/c"}}`},
			want: CNI{BinDirs: []string{"/a", "/b"}}},
		{name: "null binDirs, binDir", info: map[string]string{"config": `{"cni":{"binDirs":null,"binDir":"/c"}}`},
			want: CNI{BinDirs: []string{"/c"}}},
		{name: "config wins over cniconfig", info: map[string]string{
			"config":    `{"cni":{"binDirs":["/a"],"confDir":"/etc/a"}}`,
			"cniconfig": `{"PluginDirs":["/b"],"PluginConfDir":"/etc/b"}`},
			want: CNI{BinDirs: []string{"/a"}, ConfDir: "/etc/a"}},
		{name: "cniconfig fills what config lacks", info: map[string]string{
			"config":    `{"cni":{"binDirs":[]}}`,
			"cniconfig": `{"PluginDirs":["/b"],"PluginConfDir":"/etc/b"}`},
			want: CNI{BinDirs: []string{"/b"}, ConfDir: "/etc/b"}},
		{name: "config not JSON", info: map[string]string{"config": `{"cni":`, "cniconfig": `{"PluginDirs":["/b"]}`},
			want: CNI{BinDirs: []string{"/b"}}, wantErr: `info["config"]`},
		{name: "cni not an object", info: map[string]string{"config": `{"cni":"/opt/cni/bin"}`}, wantErr: `info["config"]`},
		{name: "binDirs not a list", info: map[string]string{"config": `{"cni":{"binDirs":"/opt/cni/bin","confDir":"/etc/cni/net.d"}}`},
			want: CNI{ConfDir: "/etc/cni/net.d"}, wantErr: "want a list of strings"},
		{name: "confDir not a string", info: map[string]string{"config": `{"cni":{"binDirs":["/a"],"confDir":7}}`},
			want: CNI{BinDirs: []string{"/a"}}, wantErr: "want a string"},
		{name: "bad paths left out", info: map[string]string{"config": `{"cni":{"binDirs":["opt/cni/bin","/a/../b","/c:/d","","/ok","/nul\u0000x"],"confDir":"etc/cni"}}`},
			want: CNI{BinDirs: []string{"/ok"}}, wantErr: "not an absolute path"},
		{name: "too many dirs", info: map[string]string{"config": `{"cni":{"binDirs":` + string(manyJSON) + `}}`},
			want: CNI{BinDirs: many[:maxBinDirs]}, wantErr: "more than 32 plugin dirs"},
		{name: "oversized value", info: map[string]string{"config": `{"x":"` + strings.Repeat("a", maxInfoValue) + `"}`}, wantErr: "bytes, more than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.info)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(got.BinDirs, tt.want.BinDirs) || got.ConfDir != tt.want.ConfDir {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzParse: for any config and cniconfig values Parse neither panics nor
// returns a path that is not absolute and clean (nor a plugin dir with ":"),
// at most maxBinDirs of them, and answers the same twice.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"containerd-v2.4.2.json", "containerd-v1.7.29.json", "cri-o-1.33.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		var info map[string]string
		if err := json.Unmarshal(b, &info); err != nil {
			f.Fatal(err)
		}
		f.Add(info["config"], info["cniconfig"])
	}
	f.Fuzz(func(t *testing.T, config, cniconfig string) {
		info := map[string]string{"config": config, "cniconfig": cniconfig}
		got, err := Parse(info)
		again, err2 := Parse(info)
		if !slices.Equal(got.BinDirs, again.BinDirs) || got.ConfDir != again.ConfDir || (err == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %+v %v, then %+v %v", got, err, again, err2)
		}
		if len(got.BinDirs) > maxBinDirs {
			t.Fatalf("%d bin dirs", len(got.BinDirs))
		}
		for _, d := range got.BinDirs {
			if checkPath(d, true) != nil || !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsAny(d, ":\x00") {
				t.Fatalf("bin dir %q returned", d)
			}
		}
		if d := got.ConfDir; d != "" && (checkPath(d, false) != nil || !filepath.IsAbs(d) || filepath.Clean(d) != d) {
			t.Fatalf("conf dir %q returned", d)
		}
	})
}

// The rest of this file is a narrow unit test against a fake CRI
// RuntimeService (not a runtime): how Discover behaves when the runtime
// does not answer, has no RuntimeService, or answers as CRI-O does.
// TestDiscoverRealContainerd (containerd_test.go) is the real thing.

type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	name, version string
	info          map[string]string
	hang          bool
}

func (r *fakeRuntime) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if r.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &runtimeapi.VersionResponse{RuntimeName: r.name, RuntimeVersion: r.version}, nil
}

func (r *fakeRuntime) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}
	if req.Verbose {
		resp.Info = r.info
	}
	return resp, nil
}

// serveFake serves svc (nil: no RuntimeService) and returns its endpoint.
func serveFake(t *testing.T, svc runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	return "unix://" + critest.Serve(t, svc)
}

// TestDiscoverFakeRuntime (fake CRI server): Discover asks for the verbose
// info, names the runtime, and returns within its context's deadline when
// the runtime does not answer.
func TestDiscoverFakeRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	crio := serveFake(t, &fakeRuntime{name: "cri-o", version: "1.33.0", info: fixture(t, "cri-o-1.33.json")})
	rt, err := Discover(ctx, crio)
	if err != nil || rt.Name != "cri-o" || rt.Version != "1.33.0" || len(rt.CNI.BinDirs) != 0 || rt.CNI.ConfDir != "" || rt.Endpoint != crio {
		t.Errorf("CRI-O: %+v, %v; want its name and no CNI settings", rt, err)
	}

	ctrd := serveFake(t, &fakeRuntime{name: "containerd", version: "v2.4.2", info: fixture(t, "containerd-v2.4.2-k3s.json")})
	rt, err = Discover(ctx, ctrd)
	if err != nil || rt.CNI.ConfDir != "/var/lib/rancher/k3s/agent/etc/cni/net.d" {
		t.Errorf("containerd: %+v, %v", rt, err)
	}

	none := serveFake(t, nil)
	if _, err := Discover(ctx, none); err == nil || !strings.Contains(err.Error(), "CRI Version") {
		t.Errorf("no RuntimeService: %v, want the Version RPC's error", err)
	}

	hung := serveFake(t, &fakeRuntime{hang: true})
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	_, err = Discover(short, hung)
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Errorf("hung runtime: %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hung runtime: Discover took %s", d)
	}

	for _, bad := range []string{"", "tcp://1.2.3.4:5", "relative.sock"} {
		if _, err := Discover(ctx, bad); err == nil {
			t.Errorf("endpoint %q: no error", bad)
		}
	}
}
