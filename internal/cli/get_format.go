package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/status"
)

// none is the table cell of a missing value, as kubectl writes it.
const none = "<none>"

// writePodNetworks writes pods in format output: "" or "wide" a table (with
// a NAMESPACE column when withNamespace), "json" or "yaml" the list of
// podNetworks.
func writePodNetworks(w io.Writer, pods []podNetworks, output string, withNamespace bool) error {
	switch output {
	case "json", "yaml":
		return writeStructured(w, pods, output)
	}
	wide := output == "wide"
	tw := printers.GetNewTabWriter(w)
	header := []string{"POD", "NETWORK", "INTERFACE", "IPS", "MAC", "DEVICE", "DEFAULT"}
	if withNamespace {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "MTU", "DEFAULT-ROUTE", "DNS")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, p := range pods {
		for _, row := range podRows(p, wide) {
			if withNamespace {
				row = append([]string{p.Namespace}, row...)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	return tw.Flush()
}

// writeStructured writes v as indented JSON or as YAML.
func writeStructured(w io.Writer, v any, output string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", output, err)
	}
	out := buf.Bytes()
	if output == "yaml" {
		var err error
		if out, err = yaml.JSONToYAML(out); err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
	}
	_, err := w.Write(out)
	return err
}

// podRows are the table rows of one pod, without the NAMESPACE column: one
// per attachment, or one <none> (no annotation) or <invalid> row.
func podRows(p podNetworks, wide bool) [][]string {
	cols := 7
	if wide {
		cols += 3
	}
	if len(p.Networks) == 0 {
		row := make([]string, cols)
		row[0], row[1] = p.Name, none
		if p.Error != "" {
			row[1] = "<invalid>"
		}
		for i := 2; i < cols; i++ {
			row[i] = none
		}
		return [][]string{row}
	}
	rows := make([][]string, 0, len(p.Networks))
	for i := range p.Networks {
		s := &p.Networks[i]
		row := []string{p.Name, s.Name, cell(s.Interface), cell(strings.Join(s.IPs, ",")), cell(s.Mac),
			cell(deviceSummary(s.DeviceInfo)), strconv.FormatBool(s.Default)}
		if wide {
			mtu := none
			if s.MTU > 0 {
				mtu = strconv.Itoa(s.MTU)
			}
			row = append(row, mtu, cell(strings.Join(s.DefaultRoute, ",")), cell(dnsSummary(s.DNS)))
		}
		rows = append(rows, row)
	}
	return rows
}

func cell(s string) string {
	if s == "" {
		return none
	}
	return s
}

// deviceSummary names the device of a device-info map (device-info spec
// §3): "pci 0000:03:00.1", "vdpa /dev/vhost-vdpa-0", "vhost-user /path",
// "memif /path"; the type alone when the map does not validate, "" when
// there is none.
func deviceSummary(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	d, err := devinfo.Decode(raw)
	if err != nil {
		var t struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Type == "" {
			return "<invalid>"
		}
		return t.Type
	}
	switch {
	case d.Type == devinfo.TypePCI && d.PCI != nil:
		return d.Type + " " + d.PCI.PCIAddress
	case d.Type == devinfo.TypeVDPA && d.VDPA != nil:
		return d.Type + " " + d.VDPA.Path
	case d.Type == devinfo.TypeVhostUser && d.VhostUser != nil:
		return d.Type + " " + d.VhostUser.Path
	case d.Type == devinfo.TypeMemif && d.Memif != nil:
		return d.Type + " " + d.Memif.Path
	}
	return d.Type
}

// dnsSummary is the DNS column: the nameservers, then search=... and
// domain=..., comma-separated.
func dnsSummary(d *status.DNS) string {
	if d == nil {
		return ""
	}
	parts := append([]string(nil), d.Nameservers...)
	if d.Domain != "" {
		parts = append(parts, "domain="+d.Domain)
	}
	for _, s := range d.Search {
		parts = append(parts, "search="+s)
	}
	return strings.Join(parts, ",")
}
