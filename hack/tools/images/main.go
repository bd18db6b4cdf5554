// Command images builds multinet's container images from scratch, without a
// container engine or a registry, with go-containerregistry: multinetd (with
// multinet-shim, multinet-netdev and multinet-install), webhook,
// deviceplugin and dra-driver, and on request (-images coredns) the local cluster's CoreDNS
// from a coredns binary built elsewhere (hack/lib/coredns.sh). Each image is
// one layer of statically linked binaries plus /etc/passwd, /etc/group and
// /tmp; each is written as a docker-archive tarball <out-dir>/<name>.tar
// carrying every requested tag, ready for `ctr -n k8s.io images import` or
// `docker load`. It prints each image's reference, digest and sizes, and
// writes <out-dir>/images.txt ("<name> <reference>" lines, the first tag)
// for scripts.
//
// Usage (hack/images.sh runs it):
//
//	images -bin-dir _output/images/bin -out-dir _output/images \
//	  -repo localhost/multinet -tags v0.1.0,dev -version v0.1.0 -revision $(git rev-parse HEAD)
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/multinet/multinet/internal/process/elfbin"
)

func main() {
	binDir := flag.String("bin-dir", "", "directory of the statically linked binaries (required)")
	outDir := flag.String("out-dir", "", "where the image tarballs go (required)")
	repo := flag.String("repo", "localhost/multinet", "repository prefix: images are <repo>/<name>:<tag>")
	tags := flag.String("tags", "dev", "comma-separated tags; every image gets all of them, the first is the one reported")
	only := flag.String("images", "", "comma-separated image names to build (default: multinet's images; coredns only when named)")
	version := flag.String("version", "dev", "org.opencontainers.image.version label")
	revision := flag.String("revision", "", "org.opencontainers.image.revision label (git commit)")
	source := flag.String("source", "https://github.com/multinet/multinet", "org.opencontainers.image.source label")
	arch := flag.String("arch", runtime.GOARCH, "architecture of the binaries (GOARCH)")
	sbomDir := flag.String("sbom-dir", "", "directory of <binary>.cdx.json CycloneDX SBOMs: every binary must have one, and each image carries its binaries' at "+SBOMDir)
	flag.Parse()
	if *binDir == "" || *outDir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: images -bin-dir DIR -out-dir DIR [-repo R] [-tags T1,T2] [-images a,b] [-version V] [-revision SHA]")
		os.Exit(2)
	}
	created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(2)
	}
	meta := Meta{Version: *version, Revision: *revision, Source: *source, Arch: *arch, Created: created}
	specs, err := selectSpecs(Specs, splitList(*only))
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(2)
	}
	results, err := run(specs, *binDir, *sbomDir, *outDir, *repo, splitList(*tags), meta)
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
	printResults(os.Stdout, results)
}

// Result is one written image.
type Result struct {
	Name, Ref, Tarball string
	// Digest is the manifest digest; ID the config digest, which is what
	// `crictl images` shows as IMAGE ID and what survives an import (the
	// importer may write a manifest of its own).
	Digest, ID v1.Hash
	// Uncompressed is the layer's tar size, Compressed its gzip size (what
	// a registry stores and a node pulls), TarballSize the archive's size.
	Uncompressed, Compressed, TarballSize int64
}

// run builds and writes specs' images, images.txt ("<name> <first tag>")
// and digests.txt ("<name> <repo>/<name>@<manifest digest>": the digest a
// registry keeps when the archive is pushed as it is, e.g. crane push; the
// input of make manifests IMAGE_DIGESTS). With sbomDir, every binary needs
// <sbomDir>/<binary>.cdx.json.
func run(specs []Spec, binDir, sbomDir, outDir, repo string, tags []string, meta Meta) ([]Result, error) {
	if len(tags) == 0 {
		return nil, fmt.Errorf("flag -tags: at least one tag is required")
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	var results []Result
	var index, digests strings.Builder
	for _, spec := range specs {
		bins, err := readBinaries(spec, binDir)
		if err != nil {
			return nil, err
		}
		sboms, err := readSBOMs(spec, sbomDir)
		if err != nil {
			return nil, err
		}
		img, err := buildImage(spec, bins, sboms, meta)
		if err != nil {
			return nil, err
		}
		refs := map[name.Reference]v1.Image{}
		var first name.Tag
		for i, t := range tags {
			tag, err := name.NewTag(repo+"/"+spec.Name+":"+t, name.StrictValidation)
			if err != nil {
				return nil, fmt.Errorf("image %s: reference: %w", spec.Name, err)
			}
			if i == 0 {
				first = tag
			}
			refs[tag] = img
		}
		out := filepath.Join(outDir, spec.Name+".tar")
		if err := writeArchive(out, refs); err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.Name, err)
		}
		r, err := describe(spec.Name, first.String(), out, img)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
		fmt.Fprintf(&index, "%s %s\n", spec.Name, first.String())
		fmt.Fprintf(&digests, "%s %s@%s\n", spec.Name, first.Context().Name(), r.Digest)
	}
	if err := os.WriteFile(filepath.Join(outDir, "images.txt"), []byte(index.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(outDir, "digests.txt"), []byte(digests.String()), 0o644); err != nil {
		return nil, err
	}
	return results, nil
}

// readSBOMs reads the CycloneDX JSON SBOM of each of spec's binaries from
// dir (none when dir is empty) and refuses one that is missing or is not a
// CycloneDX document.
func readSBOMs(spec Spec, dir string) (map[string][]byte, error) {
	if dir == "" {
		return nil, nil
	}
	out := map[string][]byte{}
	for _, f := range spec.Files {
		p := filepath.Join(dir, f.Binary+".cdx.json")
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("image %s: SBOM of %s: %w", spec.Name, f.Binary, err)
		}
		var doc struct {
			BOMFormat   string `json:"bomFormat"`
			SpecVersion string `json:"specVersion"`
		}
		if err := json.Unmarshal(data, &doc); err != nil || doc.BOMFormat != "CycloneDX" || doc.SpecVersion == "" {
			return nil, fmt.Errorf("image %s: %s is not a CycloneDX JSON SBOM (bomFormat %q, %v)", spec.Name, p, doc.BOMFormat, err)
		}
		out[f.Binary] = data
	}
	return out, nil
}

// readBinaries reads spec's binaries from binDir and refuses any that is
// not a statically linked ELF executable: the images have no loader or C
// library, so such a binary would fail only when the container starts.
func readBinaries(spec Spec, binDir string) (map[string][]byte, error) {
	bins := map[string][]byte{}
	for _, f := range spec.Files {
		p := filepath.Join(binDir, f.Binary)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.Name, err)
		}
		interp, err := elfbin.Interpreter(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("image %s: %s: %w", spec.Name, p, err)
		}
		if interp != "" {
			return nil, fmt.Errorf("image %s: %s is dynamically linked (loader %s); build it with CGO_ENABLED=0", spec.Name, p, interp)
		}
		bins[f.Binary] = data
	}
	return bins, nil
}

// writeArchive writes the docker-archive next to path and renames it into
// place, so an import never reads a half-written file.
func writeArchive(path string, refs map[name.Reference]v1.Image) error {
	tmp := path + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func describe(imageName, ref, tarPath string, img v1.Image) (Result, error) {
	r := Result{Name: imageName, Ref: ref, Tarball: tarPath}
	var err error
	if r.Digest, err = img.Digest(); err != nil {
		return r, fmt.Errorf("image %s: digest: %w", imageName, err)
	}
	if r.ID, err = img.ConfigName(); err != nil {
		return r, fmt.Errorf("image %s: config digest: %w", imageName, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return r, fmt.Errorf("image %s: layers: %w", imageName, err)
	}
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return r, fmt.Errorf("image %s: layer size: %w", imageName, err)
		}
		r.Compressed += size
		rc, err := l.Uncompressed()
		if err != nil {
			return r, fmt.Errorf("image %s: layer: %w", imageName, err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return r, fmt.Errorf("image %s: layer: %w", imageName, err)
		}
		r.Uncompressed += n
	}
	fi, err := os.Stat(tarPath)
	if err != nil {
		return r, err
	}
	r.TarballSize = fi.Size()
	return r, nil
}

func printResults(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tUNCOMPRESSED\tCOMPRESSED\tTARBALL\tIMAGE ID")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Ref, mib(r.Uncompressed), mib(r.Compressed), r.Tarball, r.ID.Hex[:13])
	}
	tw.Flush()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// selectSpecs returns the named specs, in the order named; with no names,
// every spec but the OnRequest ones.
func selectSpecs(all []Spec, names []string) ([]Spec, error) {
	if len(names) == 0 {
		var out []Spec
		for _, s := range all {
			if !s.OnRequest {
				out = append(out, s)
			}
		}
		return out, nil
	}
	var out []Spec
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n {
				out, found = append(out, s), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("flag -images: unknown image %q", n)
		}
	}
	return out, nil
}

// sourceDateEpoch is the image creation time: $SOURCE_DATE_EPOCH (the
// reproducible-builds convention) or the Unix epoch.
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
	}
	return time.Unix(s, 0).UTC(), nil
}

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}
