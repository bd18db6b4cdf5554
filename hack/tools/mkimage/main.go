// Command mkimage builds the local cluster's busybox OCI image from a static
// busybox binary, without a registry or a container engine, and writes it as
// a docker-archive tarball for `ctr -n k8s.io images import`.
//
// The image is a single layer: /bin/busybox, one symlink per applet
// (`busybox --list`), /etc/passwd and /etc/group for root and nobody, and the
// usual empty directories. Its default command is `sleep infinity`, so the
// same image serves as the pod sandbox ("pause") image and as the test-pod
// image. Timestamps are fixed, so the same busybox always gives the same
// image digest.
//
// Usage: mkimage -busybox /bin/busybox -ref localhost/multinet/busybox:v1 -o image.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	busybox := flag.String("busybox", "/bin/busybox", "path of a statically linked busybox binary")
	ref := flag.String("ref", "localhost/multinet/busybox:v1", "image reference written into the archive")
	out := flag.String("o", "", "output docker-archive tarball (required)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "mkimage: flag -o is required")
		os.Exit(2)
	}
	if err := run(*busybox, *ref, *out); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func run(busyboxPath, ref, out string) error {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return fmt.Errorf("flag -busybox: %w", err)
	}
	listing, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		return fmt.Errorf("flag -busybox: %s --list: %w", busyboxPath, err)
	}
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("flag -ref %q: %w", ref, err)
	}
	img, err := buildImage(bin, strings.Fields(string(listing)))
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

// buildImage returns a linux/amd64 image whose single layer holds busybox
// (the binary's bytes) and a symlink per applet name. It errors when the
// applet list is empty.
func buildImage(busybox []byte, applets []string) (v1.Image, error) {
	if len(applets) == 0 {
		return nil, fmt.Errorf("busybox --list printed no applets")
	}
	layerTar, err := rootfsTar(busybox, applets)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "multinet hack/tools/mkimage", Created: v1.Time{Time: epoch}},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = "amd64"
	cfg.OS = "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Env = []string{"PATH=/bin:/sbin:/usr/bin:/usr/sbin"}
	cfg.Config.Cmd = []string{"/bin/sleep", "infinity"}
	cfg.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

var epoch = time.Unix(0, 0).UTC()

// rootfsTar returns the layer's tar stream. Entries are sorted and carry
// fixed times and owners so the digest depends only on busybox.
func rootfsTar(busybox []byte, applets []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"proc", 0o555}, {"root", 0o700}, {"sbin", 0o755}, {"sys", 0o555}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/bin", 0o755}, {"var", 0o755}} {
		if err := dir(d.name, d.mode); err != nil {
			return nil, fmt.Errorf("tar %s: %w", d.name, err)
		}
	}
	if err := file("bin/busybox", 0o755, busybox); err != nil {
		return nil, fmt.Errorf("tar bin/busybox: %w", err)
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")); err != nil {
		return nil, fmt.Errorf("tar etc/passwd: %w", err)
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")); err != nil {
		return nil, fmt.Errorf("tar etc/group: %w", err)
	}
	names := append([]string(nil), applets...)
	sort.Strings(names)
	seen := map[string]bool{"busybox": true}
	for _, a := range names {
		if seen[a] || strings.ContainsAny(a, "/\x00") {
			continue
		}
		seen[a] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("tar bin/%s: %w", a, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}
