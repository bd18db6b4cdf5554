// Command vulncheck reads the JSON stream of `govulncheck -format json` on
// stdin and fails (exit 1) when the code can reach a vulnerability that the
// accepted file does not list. hack/govulncheck.sh (make verify) runs it.
//
// A finding is reachable when the first frame of its trace names a function:
// govulncheck found a call path from the scanned code to the vulnerable
// symbol. Findings at package or module level (imported, or only required)
// are counted and not failed, as govulncheck's own exit code does.
//
// The accepted file has one "<OSV ID> <module>" per line ("stdlib" for the
// standard library), then the reason; '#' starts a comment. An entry accepts
// that vulnerability in that module only: the same ID in another module
// still fails. Entries no longer found are reported, so that the file does
// not outlive its reasons.
//
// Usage: govulncheck -db file://DB -format json ./... | vulncheck -accepted FILE
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	accepted := flag.String("accepted", "", "file of accepted findings: \"<OSV ID> <module> <reason>\" lines")
	db := flag.String("db", "", "the database's name, for the report")
	flag.Parse()
	acc := map[key]string{}
	if *accepted != "" {
		f, err := os.Open(*accepted)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vulncheck: %v\n", err)
			os.Exit(2)
		}
		acc, err = parseAccepted(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "vulncheck: %s: %v\n", *accepted, err)
			os.Exit(2)
		}
	}
	r, err := check(os.Stdin, acc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vulncheck: %v\n", err)
		os.Exit(2)
	}
	r.print(os.Stdout, *db)
	if len(r.Failed) > 0 {
		os.Exit(1)
	}
}

// key is one vulnerability in one module.
type key struct{ ID, Module string }

// Reached is a reachable vulnerability in one module.
type Reached struct {
	key
	Version, Fixed, Summary string
	// Example is one call path, outermost caller first.
	Example string
	// Reason is the accepted file's reason, empty when not accepted.
	Reason string
}

// Report is what check found.
type Report struct {
	// Failed are reachable and not accepted; Accepted reachable and listed.
	Failed, Accepted []Reached
	// Unreached counts findings at package or module level only.
	Unreached int
	// Stale are accepted entries not reached.
	Stale []key
}

// parseAccepted reads "<ID> <module> <reason...>" lines.
func parseAccepted(r io.Reader) (map[key]string, error) {
	out := map[key]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "GO-") {
			return nil, fmt.Errorf("line %d: want \"<GO-ID> <module> <reason>\", got %q", n, line)
		}
		out[key{f[0], f[1]}] = strings.Join(f[2:], " ")
	}
	return out, sc.Err()
}

// message is the part of govulncheck's JSON (protocol 1.0.0) read here.
type message struct {
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
			Receiver string `json:"receiver"`
		} `json:"trace"`
	} `json:"finding"`
}

// check reads govulncheck's stream and sorts its findings against
// accepted.
func check(r io.Reader, accepted map[key]string) (*Report, error) {
	summaries := map[string]string{}
	reached := map[key]*Reached{}
	var order []key
	unreached := map[key]bool{}
	dec := json.NewDecoder(r)
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading govulncheck's JSON: %w", err)
		}
		if m.OSV != nil {
			summaries[m.OSV.ID] = m.OSV.Summary
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 {
			continue
		}
		top := f.Trace[0]
		k := key{f.OSV, top.Module}
		if top.Function == "" {
			unreached[k] = true
			continue
		}
		if _, ok := reached[k]; ok {
			continue
		}
		var path []string
		for i := len(f.Trace) - 1; i >= 0; i-- {
			fr := f.Trace[i]
			name := fr.Package + "." + fr.Function
			if fr.Receiver != "" {
				name = fr.Package + "." + strings.TrimPrefix(fr.Receiver, "*") + "." + fr.Function
			}
			path = append(path, name)
		}
		reached[k] = &Reached{key: k, Version: top.Version, Fixed: f.FixedVersion, Example: strings.Join(path, " -> ")}
		order = append(order, k)
	}
	rep := &Report{}
	for _, k := range order {
		x := reached[k]
		x.Summary = summaries[k.ID]
		if reason, ok := accepted[k]; ok {
			x.Reason = reason
			rep.Accepted = append(rep.Accepted, *x)
		} else {
			rep.Failed = append(rep.Failed, *x)
		}
	}
	for k := range unreached {
		if reached[k] == nil {
			rep.Unreached++
		}
	}
	for k := range accepted {
		if reached[k] == nil {
			rep.Stale = append(rep.Stale, k)
		}
	}
	slices.SortFunc(rep.Stale, func(a, b key) int { return strings.Compare(a.ID+a.Module, b.ID+b.Module) })
	return rep, nil
}

func (r *Report) print(w io.Writer, db string) {
	for _, x := range r.Failed {
		fmt.Fprintf(w, "REACHABLE %s in %s@%s (fixed in %s): %s\n    e.g. %s\n", x.ID, x.Module, x.Version, orNone(x.Fixed), x.Summary, x.Example)
	}
	for _, x := range r.Accepted {
		fmt.Fprintf(w, "accepted  %s in %s@%s (fixed in %s): %s\n    why: %s\n", x.ID, x.Module, x.Version, orNone(x.Fixed), x.Summary, x.Reason)
	}
	for _, k := range r.Stale {
		fmt.Fprintf(w, "stale accepted entry: %s in %s is no longer reached; remove it\n", k.ID, k.Module)
	}
	fmt.Fprintf(w, "govulncheck (%s): %d reachable not accepted, %d accepted, %d more in imported or required code that is not called\n",
		db, len(r.Failed), len(r.Accepted), r.Unreached)
}

func orNone(s string) string {
	if s == "" {
		return "no fixed version"
	}
	return s
}
