package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/multinet/multinet/internal/process/elfbin"
)

var testMeta = Meta{Version: "v1.2.3", Revision: "abc", Source: "https://example.com/multinet", Arch: "amd64", Created: time.Unix(0, 0).UTC()}

func spec(t *testing.T, n string) Spec {
	t.Helper()
	s, err := selectSpecs(Specs, []string{n})
	if err != nil {
		t.Fatal(err)
	}
	return s[0]
}

// fakeBins gives every binary of spec distinct static-ELF content.
func fakeBins(spec Spec) map[string][]byte {
	bins := map[string][]byte{}
	for _, f := range spec.Files {
		bins[f.Binary] = append(elfbin.Synthetic(""), []byte(f.Binary)...)
	}
	return bins
}

// build is buildImage with testMeta, failing the test on errors.
func build(t *testing.T, s Spec, bins map[string][]byte) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	img, err := buildImage(s, bins, nil, testMeta)
	if err != nil {
		t.Fatalf("buildImage(%s): %v", s.Name, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return img, cfg
}

type entry struct {
	typ      byte
	mode     int64
	uid, gid int
	data     string
}

// layerEntries lists the image's files (mutate.Extract flattens the
// layers) after checking there is exactly one layer.
func layerEntries(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	if m, err := img.Manifest(); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest %v (%v): want exactly one layer", m, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]entry{}
	for tr := tar.NewReader(rc); ; {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[h.Name]; dup {
			t.Errorf("duplicate entry %s", h.Name)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = entry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, data: string(b) + h.Linkname}
	}
}

func TestMultinetdImage(t *testing.T) {
	s := spec(t, "multinetd")
	bins := fakeBins(s)
	img, cfg := build(t, s, bins)
	if p := cfg.OS + "/" + cfg.Architecture; p != "linux/amd64" {
		t.Errorf("platform = %s", p)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != "/usr/local/bin/multinetd" {
		t.Errorf("Entrypoint = %q", got)
	}
	if len(cfg.Config.Cmd) != 0 {
		t.Errorf("Cmd = %q, want none (the manifests give the arguments)", cfg.Config.Cmd)
	}
	if cfg.Config.User != "0:0" {
		t.Errorf("User = %q, want 0:0 (netns, netlink, host dirs)", cfg.Config.User)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" || cfg.Config.Labels["org.opencontainers.image.revision"] != "abc" {
		t.Errorf("labels = %v", cfg.Config.Labels)
	}
	entries := layerEntries(t, img)
	for bin, p := range map[string]string{
		"multinetd":                  "usr/local/bin/multinetd",
		"multinet-delegate-launcher": "usr/local/bin/multinet-delegate-launcher",
		"multinet-install":           "usr/local/bin/multinet-install",
		"multinet-shim":              "opt/multinet/cni/bin/multinet-shim",
		"multinet-netdev":            "opt/multinet/cni/bin/multinet-netdev",
		"multinet-ipam":              "opt/multinet/cni/bin/multinet-ipam",
	} {
		e, ok := entries[p]
		if !ok {
			t.Errorf("%s missing", p)
			continue
		}
		if e.typ != tar.TypeReg || e.mode != 0o755 || e.uid != 0 || e.gid != 0 || e.data != string(bins[bin]) {
			t.Errorf("%s: type %c mode %o owner %d:%d, content match %v", p, e.typ, e.mode, e.uid, e.gid, e.data == string(bins[bin]))
		}
	}
	for _, d := range []string{"usr", "usr/local", "usr/local/bin", "opt", "opt/multinet", "opt/multinet/cni", "opt/multinet/cni/bin", "etc"} {
		if e, ok := entries[d]; !ok || e.typ != tar.TypeDir {
			t.Errorf("directory %s missing", d)
		}
	}
	if e := entries["tmp"]; e.mode != 0o1777 {
		t.Errorf("tmp mode = %o, want 1777", e.mode)
	}
	if e := entries["var/run"]; e.typ != tar.TypeSymlink || e.data != "../run" {
		t.Errorf("var/run type %c, want a symlink to ../run", e.typ)
	}
	want := 6 + 2 + 4 + 1 + 8 // binaries, passwd+group, tmp+root+run+var, var/run, parent dirs
	if len(entries) != want {
		names := make([]string, 0, len(entries))
		for n := range entries {
			names = append(names, n)
		}
		t.Errorf("layer has %d entries %q, want %d: nothing besides the binaries and the minimal /etc", len(entries), names, want)
	}
}

func TestWebhookImageIsNonRoot(t *testing.T) {
	s := spec(t, "webhook")
	img, cfg := build(t, s, fakeBins(s))
	if cfg.Config.User != "65532:65532" {
		t.Errorf("User = %q, want 65532:65532", cfg.Config.User)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != "/usr/local/bin/multinet-webhook" {
		t.Errorf("Entrypoint = %q", got)
	}
	entries := layerEntries(t, img)
	if !strings.Contains(entries["etc/passwd"].data, "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd = %q, want the nonroot user", entries["etc/passwd"].data)
	}
	if _, ok := entries["opt/multinet/cni/bin/multinet-shim"]; ok {
		t.Error("the webhook image carries the shim")
	}
}

func TestBuildImageDeterministic(t *testing.T) {
	s := spec(t, "deviceplugin")
	a, err := buildImage(s, fakeBins(s), nil, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := buildImage(s, fakeBins(s), nil, testMeta)
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("same input, digests %s and %s", da, db)
	}
	other := fakeBins(s)
	other["multinet-deviceplugin"] = append(other["multinet-deviceplugin"], 'x')
	c, _ := buildImage(s, other, nil, testMeta)
	if dc, _ := c.Digest(); dc == da {
		t.Error("a different binary gave the same digest")
	}
}

func TestBuildImageErrors(t *testing.T) {
	s := spec(t, "multinetd")
	bins := fakeBins(s)
	delete(bins, "multinet-shim")
	if _, err := buildImage(s, bins, nil, testMeta); err == nil || !strings.Contains(err.Error(), "multinet-shim") {
		t.Errorf("missing binary: err = %v", err)
	}
	bad := Spec{Name: "x", Files: []File{{"a", "relative/a"}}}
	if _, err := buildImage(bad, map[string][]byte{"a": nil}, nil, testMeta); err == nil {
		t.Error("relative path: want an error")
	}
	if _, err := selectSpecs(Specs, []string{"nope"}); err == nil {
		t.Error("unknown image name: want an error")
	}
}

func TestRunWritesImportableArchives(t *testing.T) {
	binDir, outDir := t.TempDir(), t.TempDir()
	for _, s := range Specs {
		for b, data := range fakeBins(s) {
			if err := os.WriteFile(filepath.Join(binDir, b), data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	defaults, err := selectSpecs(Specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	results, err := run(defaults, binDir, "", outDir, "localhost/multinet", []string{"v9", "dev"}, testMeta)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(results) != 4 {
		t.Fatalf("results = %d, want 4", len(results))
	}
	if _, err := os.Stat(filepath.Join(outDir, "coredns.tar")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the default set built coredns (stat: %v); it is built only on request", err)
	}
	for _, r := range results {
		if r.Compressed <= 0 || r.Uncompressed <= r.Compressed/2 || r.TarballSize < r.Compressed {
			t.Errorf("%s sizes: %+v", r.Name, r)
		}
		for _, tag := range []string{"v9", "dev"} {
			ref, _ := name.NewTag("localhost/multinet/" + r.Name + ":" + tag)
			img, err := tarball.ImageFromPath(r.Tarball, &ref)
			if err != nil {
				t.Errorf("%s: tag %s not in the archive: %v", r.Tarball, tag, err)
				continue
			}
			if d, _ := img.Digest(); d != r.Digest {
				t.Errorf("%s:%s digest %s, want %s", r.Name, tag, d, r.Digest)
			}
		}
	}
	index, _ := os.ReadFile(filepath.Join(outDir, "images.txt"))
	if !strings.Contains(string(index), "multinetd localhost/multinet/multinetd:v9\n") {
		t.Errorf("images.txt = %q", index)
	}
	if tmps, _ := filepath.Glob(filepath.Join(outDir, "*.tmp")); len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
	// digests.txt: the archives' manifest digests, for make manifests
	// IMAGE_DIGESTS.
	digests, _ := os.ReadFile(filepath.Join(outDir, "digests.txt"))
	for _, r := range results {
		if want := r.Name + " localhost/multinet/" + r.Name + "@" + r.Digest.String() + "\n"; !strings.Contains(string(digests), want) {
			t.Errorf("digests.txt = %q, want a line %q", digests, want)
		}
	}
}

// TestRunEmbedsSBOMs: with -sbom-dir every image carries the CycloneDX SBOM
// of each of its binaries at SBOMDir, byte for byte; a binary without one,
// or a file that is not CycloneDX, stops the build.
func TestRunEmbedsSBOMs(t *testing.T) {
	binDir, sbomDir, outDir := t.TempDir(), t.TempDir(), t.TempDir()
	defaults, err := selectSpecs(Specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	sbom := func(b string) []byte {
		return []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":{"name":"` + b + `"}}}`)
	}
	for _, s := range defaults {
		for b, data := range fakeBins(s) {
			if err := os.WriteFile(filepath.Join(binDir, b), data, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sbomDir, b+".cdx.json"), sbom(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	results, err := run(defaults, binDir, sbomDir, outDir, "localhost/multinet", []string{"dev"}, testMeta)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for i, r := range results {
		ref, _ := name.NewTag("localhost/multinet/" + r.Name + ":dev")
		img, err := tarball.ImageFromPath(r.Tarball, &ref)
		if err != nil {
			t.Fatal(err)
		}
		entries := layerEntries(t, img)
		for _, f := range defaults[i].Files {
			p := strings.TrimPrefix(SBOMDir, "/") + "/" + f.Binary + ".cdx.json"
			if e, ok := entries[p]; !ok || e.data != string(sbom(f.Binary)) {
				t.Errorf("image %s: no SBOM of %s at /%s", r.Name, f.Binary, p)
			}
		}
	}

	s := spec(t, "webhook")
	if err := os.Remove(filepath.Join(sbomDir, "multinet-webhook.cdx.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := run([]Spec{s}, binDir, sbomDir, t.TempDir(), "localhost/multinet", []string{"dev"}, testMeta); err == nil || !strings.Contains(err.Error(), "SBOM of multinet-webhook") {
		t.Errorf("run without the webhook's SBOM: %v", err)
	}
	if err := os.WriteFile(filepath.Join(sbomDir, "multinet-webhook.cdx.json"), []byte(`{"spdxVersion":"SPDX-2.3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run([]Spec{s}, binDir, sbomDir, t.TempDir(), "localhost/multinet", []string{"dev"}, testMeta); err == nil || !strings.Contains(err.Error(), "not a CycloneDX") {
		t.Errorf("run with a non-CycloneDX SBOM: %v", err)
	}
}

func TestRunRefusesDynamicBinaries(t *testing.T) {
	binDir := t.TempDir()
	s := spec(t, "webhook")
	if err := os.WriteFile(filepath.Join(binDir, "multinet-webhook"), elfbin.Synthetic("/lib64/ld-linux-x86-64.so.2"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := run([]Spec{s}, binDir, "", t.TempDir(), "localhost/multinet", []string{"dev"}, testMeta)
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("err = %v, want a dynamically-linked refusal", err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "multinet-webhook"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := run([]Spec{s}, binDir, "", t.TempDir(), "localhost/multinet", []string{"dev"}, testMeta); !errors.Is(err, elfbin.ErrNotELF) {
		t.Errorf("script: err = %v, want ErrNotELF", err)
	}
}

func TestSourceDateEpoch(t *testing.T) {
	if got, err := sourceDateEpoch(""); err != nil || !got.Equal(time.Unix(0, 0)) {
		t.Errorf("empty: %v, %v", got, err)
	}
	if got, err := sourceDateEpoch("1700000000"); err != nil || got.Unix() != 1700000000 {
		t.Errorf("1700000000: %v, %v", got, err)
	}
	if _, err := sourceDateEpoch("soon"); err == nil {
		t.Error("garbage: want an error")
	}
}

// TestDefaultSpecsExcludeCoreDNS: hack/images.sh runs the tool without
// -images and its binaries directory has no coredns, so the default set
// must not include it; -images coredns selects it.
func TestDefaultSpecsExcludeCoreDNS(t *testing.T) {
	defaults, err := selectSpecs(Specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range defaults {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "multinetd,webhook,deviceplugin,dra-driver" {
		t.Errorf("default images = %s, want multinetd,webhook,deviceplugin,dra-driver", got)
	}
	if s, err := selectSpecs(Specs, []string{"coredns"}); err != nil || len(s) != 1 || s[0].Name != "coredns" {
		t.Errorf("-images coredns: %v, %v", s, err)
	}
}

func TestCoreDNSImage(t *testing.T) {
	s := spec(t, "coredns")
	bins := fakeBins(s)
	img, cfg := build(t, s, bins)
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != "/coredns" {
		t.Errorf("Entrypoint = %q, want [/coredns] (the manifest passes -conf)", got)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("User = %q, want 65532:65532 (port 53 through the ip_unprivileged_port_start sysctl)", cfg.Config.User)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.title"]; got != "coredns" {
		t.Errorf("title label = %q, want coredns", got)
	}
	entries := layerEntries(t, img)
	if e, ok := entries["coredns"]; !ok || e.typ != tar.TypeReg || e.mode != 0o755 || e.data != string(bins["coredns"]) {
		t.Errorf("/coredns: %+v (present %v)", e, ok)
	}
	if !strings.Contains(entries["etc/passwd"].data, "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd = %q, want the nonroot user", entries["etc/passwd"].data)
	}

	// As hack/lib/coredns.sh runs it: -images coredns, the binaries
	// directory holding only coredns, the CoreDNS version as the tag.
	binDir, outDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(binDir, "coredns"), bins["coredns"], 0o755); err != nil {
		t.Fatal(err)
	}
	results, err := run([]Spec{s}, binDir, "", outDir, "localhost/multinet", []string{"v1.15.0"}, testMeta)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(results) != 1 || results[0].Ref != "localhost/multinet/coredns:v1.15.0" {
		t.Fatalf("results = %+v", results)
	}
	ref, _ := name.NewTag("localhost/multinet/coredns:v1.15.0")
	if _, err := tarball.ImageFromPath(filepath.Join(outDir, "coredns.tar"), &ref); err != nil {
		t.Errorf("coredns.tar: %v", err)
	}
}
