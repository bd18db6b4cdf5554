package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestSpecFile(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"create with --bundle", []string{"--root", "/r", "--log", "/l", "--log-format", "json", "create", "--bundle", "/b", "id"}, "/b/config.json"},
		{"create with -b=", []string{"create", "-b=/b2", "id"}, "/b2/config.json"},
		{"run without bundle uses cwd", []string{"--debug", "run", "id"}, "config.json"},
		{"exec with --process", []string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, "/tmp/p.json"},
		{"exec without process file", []string{"exec", "id", "sh"}, ""},
		{"other subcommand", []string{"--root", "/r", "delete", "--force", "id"}, ""},
		{"no subcommand", []string{"--version"}, ""},
		{"flag value after --", []string{"create", "--", "--bundle", "/x"}, "config.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := specFile(tt.args); got != tt.want {
				t.Errorf("specFile(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestRaiseOOMScoreAdj(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		changed bool
		want    any // value of the oomScoreAdj after the fix, nil when absent
	}{
		{"runtime config negative", `{"ociVersion":"1.0.2","process":{"args":["sh"],"oomScoreAdj":-998},"linux":{"resources":{"memory":{"limit":18446744073709551615}}}}`, true, "0"},
		{"runtime config positive untouched", `{"process":{"oomScoreAdj":1000}}`, false, "1000"},
		{"runtime config without value", `{"process":{"args":["sh"]}}`, false, nil},
		{"process file negative", `{"args":["sh"],"oomScoreAdj":-997}`, true, "0"},
		{"zero untouched", `{"process":{"oomScoreAdj":0}}`, false, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(file, []byte(tt.in), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := raiseOOMScoreAdj(file); err != nil {
				t.Fatalf("raiseOOMScoreAdj: %v", err)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.changed && string(data) != tt.in {
				t.Errorf("file rewritten although nothing to fix:\n got %s\nwant %s", data, tt.in)
			}
			var doc map[string]any
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("result is not JSON: %v", err)
			}
			target := doc
			if p, ok := doc["process"].(map[string]any); ok {
				target = p
			}
			got, ok := target["oomScoreAdj"]
			switch {
			case tt.want == nil && ok:
				t.Errorf("oomScoreAdj = %v, want absent", got)
			case tt.want != nil && (!ok || got.(json.Number).String() != tt.want):
				t.Errorf("oomScoreAdj = %v, want %v", got, tt.want)
			}
			// Large numbers elsewhere survive the round trip unchanged.
			if l, ok := doc["linux"].(map[string]any); ok {
				lim := l["resources"].(map[string]any)["memory"].(map[string]any)["limit"].(json.Number).String()
				if lim != "18446744073709551615" {
					t.Errorf("memory limit = %s, want 18446744073709551615", lim)
				}
			}
		})
	}
}

func TestRaiseOOMScoreAdjErrors(t *testing.T) {
	dir := t.TempDir()
	if err := raiseOOMScoreAdj(filepath.Join(dir, "missing.json")); err != nil {
		t.Errorf("missing file: got %v, want nil (runc reports it)", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"process":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := raiseOOMScoreAdj(bad); err == nil {
		t.Error("truncated JSON: got nil error")
	}
	notInt := filepath.Join(dir, "float.json")
	if err := os.WriteFile(notInt, []byte(`{"process":{"oomScoreAdj":-1.5}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := raiseOOMScoreAdj(notInt); err == nil {
		t.Error("non-integer oomScoreAdj: got nil error")
	}
}

// FuzzFixSpec: fixSpec never panics; when it reports a change, the result is
// JSON whose oomScoreAdj is 0; when it does not, the input comes back as is.
func FuzzFixSpec(f *testing.F) {
	for _, s := range []string{
		`{"process":{"oomScoreAdj":-998}}`,
		`{"process":{"oomScoreAdj":5},"linux":{}}`,
		`{"oomScoreAdj":-1}`,
		`{"process":null}`,
		`{"process":{"oomScoreAdj":"x"}}`,
		`[]`,
		`{"process":{"oomScoreAdj":-1e3}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, changed, err := fixSpec(in)
		if err != nil {
			return
		}
		if !changed {
			if !bytes.Equal(out, in) {
				t.Fatalf("unchanged spec rewritten: %q -> %q", in, out)
			}
			return
		}
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("changed spec is not JSON: %v: %q", err, out)
		}
		target := doc
		if p, ok := doc["process"].(map[string]any); ok {
			target = p
		}
		if n, _ := target["oomScoreAdj"].(json.Number); n.String() != "0" {
			t.Fatalf("oomScoreAdj after fix = %v, want 0 (in %q)", target["oomScoreAdj"], in)
		}
	})
}
