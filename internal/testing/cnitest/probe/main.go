// Command probe is a CNI plugin for tests: it reports what a delegate sees
// where it runs. For every CNI command it appends one JSON line (Report) to
// the file its network configuration names in "probeFile" (a path in the
// plugin's own view), and on ADD it passes prevResult through, so it can sit
// at the end of any config list. Outside CNI (CNI_COMMAND unset) it prints
// the Report on stdout. With PROBE_ALLOC_MB=N it allocates and touches N MiB
// once it has read its configuration, as a plugin does its work.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// Report is what the probe saw.
type Report struct {
	Command string `json:"command"`
	// Argv0 is os.Args[0]: the path the plugin was run by (a multi-call
	// binary's links tell it which plugin to be by this).
	Argv0 string `json:"argv0"`
	// Cwd is the working directory.
	Cwd string `json:"cwd"`
	// Cgroup is /proc/self/cgroup.
	Cgroup string `json:"cgroup"`
	// Path is $PATH.
	Path string `json:"path"`
	// Marker is the content of the file "readFile" names, or the error.
	Marker string `json:"marker,omitempty"`
	// Stdin is the configuration the plugin got.
	Stdin string `json:"stdin,omitempty"`
}

type conf struct {
	types.NetConf
	ProbeFile string `json:"probeFile"`
	ReadFile  string `json:"readFile"`
}

func report(command string, stdin []byte, readFile string) Report {
	r := Report{Command: command, Argv0: os.Args[0], Path: os.Getenv("PATH"), Stdin: string(stdin)}
	r.Cwd, _ = os.Getwd()
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		r.Cgroup = string(b)
	}
	if readFile != "" {
		b, err := os.ReadFile(readFile)
		if err != nil {
			r.Marker = "error: " + err.Error()
		} else {
			r.Marker = strings.TrimSpace(string(b))
		}
	}
	return r
}

func record(command string, args *skel.CmdArgs) (*conf, error) {
	c := &conf{}
	if err := json.Unmarshal(args.StdinData, c); err != nil {
		return nil, fmt.Errorf("probe: config: %w", err)
	}
	if c.ProbeFile == "" {
		return c, nil
	}
	b, _ := json.Marshal(report(command, args.StdinData, c.ReadFile))
	f, err := os.OpenFile(c.ProbeFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	return c, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	allocate()
	c, err := record("ADD", args)
	if err != nil {
		return err
	}
	if err := version.ParsePrevResult(&c.NetConf); err != nil {
		return err
	}
	res := c.PrevResult
	if res == nil {
		res = &current.Result{CNIVersion: c.CNIVersion}
	}
	return types.PrintResult(res, c.CNIVersion)
}

// allocate touches PROBE_ALLOC_MB MiB when that is set, to test where the
// memory is charged.
func allocate() {
	mb, _ := strconv.Atoi(os.Getenv("PROBE_ALLOC_MB"))
	if mb <= 0 {
		return
	}
	buf := make([]byte, mb<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	runtime.KeepAlive(buf)
}

func main() {
	if os.Getenv("CNI_COMMAND") == "" {
		stdin, _ := io.ReadAll(os.Stdin)
		allocate()
		b, _ := json.Marshal(report("", stdin, os.Getenv("PROBE_READ_FILE")))
		fmt.Println(string(b))
		return
	}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:   cmdAdd,
		Del:   func(a *skel.CmdArgs) error { _, err := record("DEL", a); return err },
		Check: func(a *skel.CmdArgs) error { _, err := record("CHECK", a); return err },
		GC:    func(a *skel.CmdArgs) error { _, err := record("GC", a); return err },
	}, version.All, "multinet test probe")
}
