package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	okPod  = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations: {k8s.v1.cni.cncf.io/networks: net-a}\n"
	okNAD  = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: net-a}\nspec: {config: '{\"cniVersion\":\"1.0.0\",\"type\":\"bridge\"}'}\n"
	badMAC = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\n  annotations: {k8s.v1.cni.cncf.io/networks: '[{\"name\":\"net-a\",\"mac\":\"zz\"}]'}\n"
	// macPod asks net-a (okNAD: no capability) for a MAC.
	macPod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: mac\n  annotations: {k8s.v1.cni.cncf.io/networks: '[{\"name\":\"net-a\",\"mac\":\"02:00:00:00:00:01\"}]'}\n"
)

func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(args, Streams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLintCommand(t *testing.T) {
	dir := t.TempDir()
	nads := write(t, dir, "nads.yaml", okNAD)
	pods := write(t, dir, "pods.yml", okPod)
	bad := write(t, dir, "bad.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad","annotations":{"k8s.v1.cni.cncf.io/networks":"a,,b"}}}`)
	broken := write(t, dir, "broken.yaml", "kind: Pod\nmetadata: [x\n")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, sub, "a.yaml", okNAD)
	write(t, sub, "b.yaml", okPod)
	write(t, sub, "README.md", "not a manifest")
	empty := t.TempDir()

	for _, tc := range []struct {
		name     string
		stdin    string
		args     []string
		code     int
		stdout   []string // substrings, in order
		stderr   string   // substring; "" means stderr must be empty
		noStdout bool
	}{
		{name: "valid files, NADs from another file", args: []string{"lint", "-f", pods, "-f", nads},
			code: 0, stdout: []string{"ok  Pod default/web (1 network)\n", "ok  NetworkAttachmentDefinition default/net-a\n", "2 objects: 2 valid, 0 invalid, 0 skipped\n"}},
		{name: "a directory: its .yaml/.yml/.json files in order", args: []string{"lint", "-f", sub},
			code: 0, stdout: []string{"ok  NetworkAttachmentDefinition default/net-a", "ok  Pod default/web"}},
		{name: "stdin", stdin: okNAD + "---\n" + okPod, args: []string{"lint", "-f", "-"},
			code: 0, stdout: []string{"ok  NetworkAttachmentDefinition", "ok  Pod default/web (1 network)"}},
		{name: "an invalid object: exit 1, errors indented", args: []string{"lint", "-f", bad, "-f", nads},
			code: 1, stdout: []string{"invalid  Pod default/bad (" + bad + ":1)\n    metadata.annotations[\"k8s.v1.cni.cncf.io/networks\"]: networks[1]", "1 invalid"}},
		{name: "--require-nads", args: []string{"lint", "-f", pods, "--require-nads"},
			code: 1, stdout: []string{"invalid  Pod default/web", "NetworkAttachmentDefinition default/net-a not found"}},
		{name: "-n gives objects without a namespace one", stdin: okPod, args: []string{"lint", "-f", "-", "-n", "team", "-o", "wide"},
			code: 0, stdout: []string{"ok  Pod team/web (1 network)\n    note: ", "team/net-a is not in the input"}},
		{name: "-o json", stdin: badMAC, args: []string{"lint", "-f", "-", "-o", "json"},
			code: 1, stdout: []string{"[\n  {\n    \"kind\": \"Pod\",", `"valid": false`, `field \"mac\"`}},
		{name: "undeclared capability refused by default; lint lists the NAD", stdin: okNAD + "---\n" + macPod, args: []string{"lint", "-f", "-"},
			code: 1, stdout: []string{"invalid  Pod default/mac", `field "mac": needs runtimeConfig "mac"`, "(spec §4.1.2.1.4.2)",
				`NetworkAttachmentDefinitions relying on undeclaredCapabilities: multus: default/net-a ("mac")`}},
		{name: "--undeclared-capabilities=multus: valid with a warning", stdin: okNAD + "---\n" + macPod, args: []string{"lint", "-f", "-", "--undeclared-capabilities=multus"},
			code: 0, stdout: []string{"ok  NetworkAttachmentDefinition default/net-a", `warning: no plugin declares "capabilities": {"mac": true}, which Pod default/mac asks for`,
				"ok  Pod default/mac", `warning: metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "net-a": NetworkAttachmentDefinition default/net-a declares no capability "mac"`,
				`relying on undeclaredCapabilities: multus: default/net-a ("mac")`}},
		{name: "--undeclared-capabilities unknown", args: []string{"lint", "-f", pods, "--undeclared-capabilities=allow"},
			code: 2, noStdout: true, stderr: `--undeclared-capabilities: undeclaredCapabilities "allow"`},
		{name: "empty input: nothing to check", stdin: "# nothing\n", args: []string{"lint", "-f", "-", "-o", "json"},
			code: 0, stdout: []string{"[]\n"}, stderr: "warning: no objects in the input"},
		{name: "YAML syntax error: exit 2, file and line", args: []string{"lint", "-f", pods, "-f", broken},
			code: 2, noStdout: true, stderr: "error: " + broken + ":1: YAML: line 2: "},
		{name: "missing files: every one is named", args: []string{"lint", "-f", filepath.Join(dir, "nope1"), "-f", filepath.Join(dir, "nope2")},
			code: 2, noStdout: true, stderr: "nope1: no such file or directory\n" + filepath.Join(dir, "nope2") + ": no such file or directory\n"},
		{name: "a directory without manifests", args: []string{"lint", "-f", empty},
			code: 2, noStdout: true, stderr: "no .yaml, .yml or .json files in the directory"},
		{name: "stdin twice", args: []string{"lint", "-f", "-", "-f", "-"},
			code: 2, noStdout: true, stderr: "standard input given twice"},
		{name: "no -f", args: []string{"lint"},
			code: 2, noStdout: true, stderr: "error: lint: at least one -f FILENAME is required"},
		{name: "unknown output format", args: []string{"lint", "-f", pods, "-o", "yaml"},
			code: 2, noStdout: true, stderr: `--output "yaml": must be empty, wide or json`},
		{name: "bad namespace", args: []string{"lint", "-f", pods, "-n", "Team"},
			code: 2, noStdout: true, stderr: `--namespace "Team"`},
		{name: "unknown flag", args: []string{"lint", "--bogus"},
			code: 2, noStdout: true, stderr: "error: unknown flag: --bogus\nSee 'kubectl multinet lint --help'."},
		{name: "arguments", args: []string{"lint", "pods.yaml"},
			code: 2, noStdout: true, stderr: `unknown command "pods.yaml"`},
		{name: "unknown command", args: []string{"nope"},
			code: 2, noStdout: true, stderr: `error: unknown command "nope" for "kubectl multinet"`},
		{name: "help", args: []string{"lint", "--help"},
			code: 0, stdout: []string{"kubectl multinet lint -f FILENAME", "--require-nads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			rest := stdout
			for _, s := range tc.stdout {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Errorf("stdout lacks %q (in order):\n%s", s, stdout)
					break
				}
				rest = rest[i+len(s):]
			}
			if tc.noStdout && stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if tc.stderr == "" && stderr != "" || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tc.stderr)
			}
		})
	}
}

// TestRootHasLint: the root command lists lint, and its help shows the
// kubectl plugin's name.
func TestRootHasLint(t *testing.T) {
	code, stdout, _ := run(t, "", "--help")
	if code != 0 || !strings.Contains(stdout, "kubectl multinet [command]") || !strings.Contains(stdout, "\n  lint ") {
		t.Fatalf("--help = %d:\n%s", code, stdout)
	}
}
