package explain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/multinet/multinet/pkg/spec/status"
)

// WriteText writes x for people: the pod, one block per attachment (the
// default network override first), the pod's errors and notes, the current
// network-status and a one-line result. The only error is w's.
func WriteText(w io.Writer, x *Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod:       %s/%s\n", x.Namespace, x.Name)
	fmt.Fprintf(&b, "Node:      %s\n", orNone(x.Node))
	fmt.Fprintf(&b, "Networks:  %s\n", orNone(oneLine(x.NetworksAnnotation)))
	if all := x.allAttachments(); len(all) > 0 {
		b.WriteString("Attachments:\n")
		for _, a := range all {
			writeAttachment(&b, a)
		}
	}
	writeList(&b, "Errors:", x.Errors)
	writeList(&b, "Notes:", x.Notes)
	switch {
	case x.NetworkStatusError != "":
		fmt.Fprintf(&b, "Network status: invalid: %s\n", x.NetworkStatusError)
	case x.NetworkStatus != nil:
		b.WriteString("Network status:\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for i := range x.NetworkStatus {
			fmt.Fprintf(tw, "  %s\n", strings.TrimRight(strings.Join(statusParts(&x.NetworkStatus[i]), "\t"), "\t"))
		}
		_ = tw.Flush() // writes to a strings.Builder: cannot fail
	default:
		b.WriteString("Network status: <none>\n")
	}
	if x.NetworkPolicy != nil {
		writePolicy(&b, x.NetworkPolicy)
	}
	b.WriteString("Result:    " + result(x) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeAttachment(b *strings.Builder, a *Attachment) {
	verdict := "OK"
	if a.Error != "" {
		verdict = "FAIL"
	}
	what := fmt.Sprintf("[%d]", a.Index)
	if a.Index < 0 {
		what = "[default network]"
	}
	fmt.Fprintf(b, "  %s %s -> %s: %s\n", what, a.Network, orNone(a.Interface), verdict)
	kv := func(k, v string) { fmt.Fprintf(b, "      %-14s %s\n", k+":", v) }
	if a.Error != "" {
		kv("error", a.Error)
	}
	if a.NADFound {
		nad := "config from " + a.ConfigSource
		if a.ConfigSource == SourceNode {
			nad = "no spec.config (the node's CNI config is used)"
		}
		if a.ResourceName != "" {
			nad += ", resourceName " + a.ResourceName
		}
		kv("NAD", nad)
	}
	if len(a.Plugins) > 0 {
		ps := make([]string, len(a.Plugins))
		for i, p := range a.Plugins {
			ps[i] = p.Type
			if len(p.RuntimeConfig) > 0 {
				ps[i] += " (runtimeConfig " + strings.Join(p.RuntimeConfig, ", ") + ")"
			}
		}
		kv("plugins", strings.Join(ps, ", "))
	}
	if len(a.RuntimeConfig) > 0 {
		kv("runtimeConfig", compact(a.RuntimeConfig))
	}
	if len(a.Element.CNIArgs) > 0 {
		kv("args.cni", compact(a.Element.CNIArgs))
	}
	if len(a.Config) > 0 {
		var c bytes.Buffer
		if json.Compact(&c, a.Config) != nil {
			c.Reset()
			c.Write(a.Config)
		}
		kv("config", c.String())
	}
	if a.Status != nil {
		kv("status", statusLine(a.Status))
	}
	for _, n := range a.Notes {
		kv("note", n)
	}
}

func writeList(b *strings.Builder, title string, items []string) {
	if len(items) == 0 {
		return
	}
	b.WriteString(title + "\n")
	for _, s := range items {
		b.WriteString("  - " + s + "\n")
	}
}

// statusParts are the columns of one network-status entry: interface,
// name, ips, mac, device-info and "default"; empty strings for the absent
// ones.
func statusParts(s *status.NetworkStatus) []string {
	parts := []string{orNone(s.Interface), s.Name, "", "", "", ""}
	if len(s.IPs) > 0 {
		parts[2] = "ips " + strings.Join(s.IPs, ",")
	}
	if s.Mac != "" {
		parts[3] = "mac " + s.Mac
	}
	if len(s.DeviceInfo) > 0 {
		parts[4] = "device-info " + string(s.DeviceInfo)
	}
	if s.Default {
		parts[5] = "default"
	}
	return parts
}

// statusLine is statusParts on one line.
func statusLine(s *status.NetworkStatus) string {
	return strings.Join(slices.DeleteFunc(statusParts(s), func(p string) bool { return p == "" }), "  ")
}

func result(x *Explanation) string {
	failed := 0
	all := x.allAttachments()
	for _, a := range all {
		if a.Error != "" {
			failed++
		}
	}
	switch {
	case x.OK:
		return fmt.Sprintf("OK: multinetd would attach %d network(s) besides the default network", len(x.Attachments))
	case failed > 0:
		return fmt.Sprintf("FAIL: %d of %d attachment(s) would fail, so multinetd fails the pod's network setup", failed, len(all))
	default:
		return "FAIL: multinetd fails the pod's network setup (see Errors)"
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// oneLine folds the white space of an annotation written over many lines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// compact is v as compact JSON (keys sorted).
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
