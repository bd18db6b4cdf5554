package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multinet/multinet/internal/cli/lint"
)

// buildBinary builds kubectl-multinet into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-multinet")
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runBinary runs bin with args and stdin and returns its exit status and output.
func runBinary(t *testing.T, bin, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// decodeEntries decodes the -o json output and checks what every entry must
// hold.
func decodeEntries(t *testing.T, stdout string) []lint.Result {
	t.Helper()
	var es []lint.Result
	if err := json.Unmarshal([]byte(stdout), &es); err != nil {
		t.Fatalf("-o json output is not a JSON list: %v\n%s", err, stdout)
	}
	for i, e := range es {
		for j, n := range e.Networks {
			var c bytes.Buffer
			if err := json.Compact(&c, n); err != nil {
				t.Fatal(err)
			}
			es[i].Networks[j] = c.Bytes()
		}
		if e.Errors == nil || e.Warnings == nil || e.Notes == nil || e.Networks == nil {
			t.Errorf("%s %s/%s: errors, warnings, notes and networks must be lists, not null:\n%s", e.Kind, e.Namespace, e.Name, stdout)
		}
		if e.Valid != (len(e.Errors) == 0) {
			t.Errorf("%s %s/%s: valid = %v with errors %q", e.Kind, e.Namespace, e.Name, e.Valid, e.Errors)
		}
	}
	return es
}

func TestBinary(t *testing.T) {
	bin := buildBinary(t)
	td := func(name string) string { return filepath.Join("testdata", name) }
	valid, err := os.ReadFile(td("valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("valid manifests exit 0, one line per object", func(t *testing.T) {
		code, stdout, stderr := runBinary(t, bin, "", "lint", "-f", td("valid.yaml"))
		want := "ok  NetworkAttachmentDefinition default/a-bridge-network\n" +
			"ok  NetworkAttachmentDefinition default/static-net\n" +
			"ok  NetworkAttachmentDefinition default/on-disk-net (1 note)\n" +
			"ok  Pod default/web (2 networks, 1 note)\n" +
			"ok  Deployment default/api (2 networks)\n" +
			"skipped  ConfigMap default/settings\n" +
			"6 objects: 5 valid, 0 invalid, 1 skipped\n"
		if code != 0 || stdout != want || stderr != "" {
			t.Errorf("exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", code, stdout, want, stderr)
		}
	})

	t.Run("stdin gives the same verdicts as the file", func(t *testing.T) {
		code, stdout, _ := runBinary(t, bin, string(valid), "lint", "-f", "-", "-o", "json")
		es := decodeEntries(t, stdout)
		if code != 0 || len(es) != 5 {
			t.Fatalf("exit %d, %d entries (want 0 and 5, the ConfigMap left out):\n%s", code, len(es), stdout)
		}
		api := es[4]
		if api.Kind != "Deployment" || api.Name != "api" || len(api.Networks) != 2 ||
			string(api.Networks[0]) != `{"name":"static-net","namespace":"default","ips":["10.1.1.5/24"],"mac":"02:00:00:00:00:01","interface":"net1"}` ||
			string(api.Networks[1]) != `{"name":"a-bridge-network","namespace":"default","interface":"net2"}` {
			t.Errorf("Deployment entry = %+v", api)
		}
		web := es[3]
		if string(web.Networks[1]) != `{"name":"on-disk-net","namespace":"default","interface":"data0"}` {
			t.Errorf("Pod web networks = %s", web.Networks)
		}
	})

	t.Run("invalid manifests exit 1 with field-precise errors", func(t *testing.T) {
		code, stdout, stderr := runBinary(t, bin, "", "lint", "-f", td("invalid.yaml"), "-o", "json")
		es := decodeEntries(t, stdout)
		if code != 1 || stderr != "" || len(es) != 4 {
			t.Fatalf("exit %d, %d entries, stderr %q:\n%s", code, len(es), stderr, stdout)
		}
		wantValid := []bool{false, true, false, false}
		wantErr := []string{
			"spec.config: field plugins[1].type",
			"",
			`networks[0] "plain": field "mac": needs runtimeConfig "mac"`,
			`spec.jobTemplate.spec.template.metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "plain": field "interface"`,
		}
		for i, e := range es {
			if e.Valid != wantValid[i] {
				t.Errorf("entry %d (%s %s): valid = %v, want %v", i, e.Kind, e.Name, e.Valid, wantValid[i])
			}
			if wantErr[i] != "" && !strings.Contains(strings.Join(e.Errors, "\n"), wantErr[i]) {
				t.Errorf("entry %d (%s %s): errors %q lack %q", i, e.Kind, e.Name, e.Errors, wantErr[i])
			}
		}
	})

	t.Run("a List in JSON", func(t *testing.T) {
		code, stdout, _ := runBinary(t, bin, "", "lint", "-f", td("list.json"), "-o", "json")
		es := decodeEntries(t, stdout)
		if code != 0 || len(es) != 2 || es[1].Namespace != "blue" || len(es[1].Networks) != 2 || len(es[0].Networks) != 0 {
			t.Fatalf("exit %d:\n%s", code, stdout)
		}
	})

	t.Run("valid and invalid files together exit 1", func(t *testing.T) {
		code, stdout, _ := runBinary(t, bin, "", "lint", "-f", td("valid.yaml"), "-f", td("invalid.yaml"))
		if code != 1 || !strings.Contains(stdout, "10 objects: 6 valid, 3 invalid, 1 skipped") {
			t.Fatalf("exit %d:\n%s", code, stdout)
		}
	})

	t.Run("unreadable input exits 2 with a message on stderr", func(t *testing.T) {
		for _, args := range [][]string{
			{"lint", "-f", td("broken.yaml")},
			{"lint", "-f", td("valid.yaml"), "-f", td("missing.yaml")},
		} {
			code, stdout, stderr := runBinary(t, bin, "", args...)
			if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "error: testdata/") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
			}
		}
		code, _, stderr := runBinary(t, bin, "", "lint", "-f", td("broken.yaml"))
		if want := "error: testdata/broken.yaml:6: YAML: line 9: did not find expected ',' or ']'\n"; code != 2 || stderr != want {
			t.Errorf("broken.yaml: exit %d, stderr %q, want %q", code, stderr, want)
		}
	})
}
