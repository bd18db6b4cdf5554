// Command runc-oomfix is a TEST-ENVIRONMENT SHIM ONLY. Never use it on a real
// node.
//
// The sandbox the project's local cluster runs in denies lowering a process's
// oom_score_adj, even to root. The kubelet asks for -998 on every pod sandbox
// (and -997 for Guaranteed containers); runc then fails with "can't get final
// child's PID from pipe: EOF". containerd's runc runtime is configured with
// this program as its BinaryName: it raises a negative
// .process.oomScoreAdj to 0 in the OCI bundle's config.json (runc create/run)
// or in the process file (runc exec --process), then execs the real runc with
// the unchanged arguments.
//
// The real runc is $MULTINET_RUNC when set, else the first "runc" on $PATH.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// globalFlagsWithValue are runc's global flags that take a separate value
// ("--root DIR"); the subcommand is the first argument that is neither one of
// them, nor their value, nor another flag.
var globalFlagsWithValue = map[string]bool{
	"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true,
}

func main() {
	args := os.Args[1:]
	if file := specFile(args); file != "" {
		if err := raiseOOMScoreAdj(file); err != nil {
			fmt.Fprintf(os.Stderr, "runc-oomfix: %v\n", err)
			os.Exit(1)
		}
	}
	runc, err := realRunc()
	if err != nil {
		fmt.Fprintf(os.Stderr, "runc-oomfix: %v\n", err)
		os.Exit(1)
	}
	err = syscall.Exec(runc, append([]string{"runc"}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "runc-oomfix: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// specFile returns the JSON file whose .process.oomScoreAdj (create, run) or
// .oomScoreAdj (exec --process) runc will apply, or "" when the command
// applies none. args are runc's arguments without the program name.
func specFile(args []string) string {
	i := 0
	for i < len(args) {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		if globalFlagsWithValue[a] {
			i++
		}
		i++
	}
	if i >= len(args) {
		return ""
	}
	sub, rest := args[i], args[i+1:]
	switch sub {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		return filepath.Join(bundle, "config.json")
	case "exec":
		return flagValue(rest, "--process", "-p")
	}
	return ""
}

// flagValue returns the value of the flag named long or short in args, in the
// forms "--flag v", "--flag=v", "-f v"; "" when absent.
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		if a == "--" {
			return ""
		}
		for _, name := range []string{long, short} {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// raiseOOMScoreAdj rewrites file in place when it holds a negative
// oomScoreAdj, either at .process.oomScoreAdj (an OCI runtime config) or at
// .oomScoreAdj (an OCI process, as given to runc exec), setting it to 0. A
// missing file or a file without a negative value is left untouched.
func raiseOOMScoreAdj(file string) error {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	out, changed, err := fixSpec(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if !changed {
		return nil
	}
	st, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("stat %s: %w", file, err)
	}
	tmp := file + ".oomfix.tmp"
	if err := os.WriteFile(tmp, out, st.Mode().Perm()); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", file, err)
	}
	return nil
}

// fixSpec returns data with a negative oomScoreAdj raised to 0 and whether it
// changed anything. Numbers are kept as written (json.Number), so large
// values elsewhere in the spec survive the round trip.
func fixSpec(data []byte) ([]byte, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, false, fmt.Errorf("parse JSON: %w", err)
	}
	target := doc
	if p, ok := doc["process"].(map[string]any); ok {
		target = p
	}
	n, ok := target["oomScoreAdj"].(json.Number)
	if !ok {
		return data, false, nil
	}
	v, err := n.Int64()
	if err != nil {
		return nil, false, fmt.Errorf("field oomScoreAdj %q: %w", n, err)
	}
	if v >= 0 {
		return data, false, nil
	}
	target["oomScoreAdj"] = json.Number("0")
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, false, fmt.Errorf("encode JSON: %w", err)
	}
	return out, true, nil
}

// realRunc finds the runc binary to exec, never this program itself.
func realRunc() (string, error) {
	if p := os.Getenv("MULTINET_RUNC"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "runc")
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			continue
		}
		if same(p, self) {
			continue
		}
		return p, nil
	}
	if p, err := exec.LookPath("/usr/sbin/runc"); err == nil {
		return p, nil
	}
	return "", errors.New("runc not found on PATH; set MULTINET_RUNC")
}

func same(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
