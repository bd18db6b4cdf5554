package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// Invalid reports whether some result is invalid (kubectl-multinet lint
// then exits 1).
func Invalid(results []Result) bool {
	for _, r := range results {
		if !r.Valid {
			return true
		}
	}
	return false
}

// WriteJSON writes the results of the checked objects (skipped ones left out)
// as one indented JSON list, "[]" when there are none.
func WriteJSON(w io.Writer, results []Result) error {
	out := make([]Result, 0, len(results))
	for _, r := range results {
		if !r.Skipped {
			out = append(out, r)
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// WriteText writes the results for people, in input order:
//
//	ok  Pod default/web (3 networks)
//	invalid  Deployment default/api (api.yaml:12)
//	    spec.template.metadata.annotations[k8s.v1.cni.cncf.io/networks]: ...
//	skipped  ConfigMap default/settings
//
// then a summary line. Each object's warnings follow it, indented and
// marked "warning:", and the summary counts them when there are some. With
// notes, each object's notes follow, indented and marked "note:"; without,
// valid objects say how many notes they have.
func WriteText(w io.Writer, results []Result, notes bool) error {
	var b strings.Builder
	var valid, invalid, skipped, warnings int
	for _, r := range results {
		name := r.Namespace + "/" + r.Name
		if r.Name == "" && r.GenerateName != "" {
			name = r.Namespace + "/" + r.GenerateName + "*"
		}
		var detail []string
		switch {
		case r.Skipped:
			skipped++
			fmt.Fprintf(&b, "skipped  %s %s\n", r.Kind, name)
			continue
		case r.Valid:
			valid++
			if r.Kind != "NetworkAttachmentDefinition" {
				detail = append(detail, plural(len(r.Networks), "network"))
			}
			if !notes && len(r.Notes) > 0 {
				detail = append(detail, plural(len(r.Notes), "note"))
			}
			b.WriteString("ok  " + r.Kind + " " + name)
		default:
			invalid++
			detail = append(detail, r.Source)
			b.WriteString("invalid  " + r.Kind + " " + name)
		}
		if len(detail) > 0 {
			b.WriteString(" (" + strings.Join(detail, ", ") + ")")
		}
		b.WriteByte('\n')
		for _, e := range r.Errors {
			b.WriteString("    " + e + "\n")
		}
		for _, wn := range r.Warnings {
			b.WriteString("    warning: " + wn + "\n")
		}
		warnings += len(r.Warnings)
		if notes {
			for _, n := range r.Notes {
				b.WriteString("    note: " + n + "\n")
			}
		}
	}
	fmt.Fprintf(&b, "%s: %d valid, %d invalid, %d skipped", plural(len(results), "object"), valid, invalid, skipped)
	if warnings > 0 {
		b.WriteString(", " + plural(warnings, "warning"))
	}
	b.WriteByte('\n')
	if nads := RelyingNADs(results); len(nads) > 0 {
		fmt.Fprintf(&b, "NetworkAttachmentDefinitions relying on undeclaredCapabilities: %s: %s\n", podnetworks.MultusUndeclared, strings.Join(nads, ", "))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
