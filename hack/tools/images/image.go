package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRoot is the uid and gid of the images that do not need root (the
// distroless "nonroot" convention).
const NonRoot = 65532

// File is one binary of an image.
type File struct {
	// Binary is the file name in the binaries directory.
	Binary string
	// Path is where it goes in the image, absolute.
	Path string
}

// Spec describes one image.
type Spec struct {
	// Name is the repository name below the repo prefix, e.g. "multinetd".
	Name        string
	Description string
	Files       []File
	Entrypoint  []string
	// User is the image's default user ("uid:gid").
	User string
	// Title is the org.opencontainers.image.title label; default
	// "multinet-<Name>".
	Title string
	// OnRequest images are not part of the default set: they are built
	// only when -images names them (their binaries are not multinet's and
	// hack/images.sh does not build them).
	OnRequest bool
}

// Specs are multinet's images. multinetd, the device plugin and the DRA
// driver run as root: they create network interfaces, enter network namespaces and write
// into root-owned host directories (CNI dirs, kubelet's device-plugins dir).
// The webhook only serves HTTPS and talks to the API server, so it does not.
var Specs = []Spec{
	{
		Name:        "multinetd",
		Description: "multinet node daemon and its delegate launcher, CNI shim, netdev and IPAM plugins, and their installer",
		Files: []File{
			{"multinetd", "/usr/local/bin/multinetd"},
			// multinetd's delegate launcher, found next to multinetd
			// (nodeexec.LauncherCommand).
			{"multinet-delegate-launcher", "/usr/local/bin/multinet-delegate-launcher"},
			{"multinet-install", "/usr/local/bin/multinet-install"},
			{"multinet-shim", "/opt/multinet/cni/bin/multinet-shim"},
			{"multinet-netdev", "/opt/multinet/cni/bin/multinet-netdev"},
			{"multinet-ipam", "/opt/multinet/cni/bin/multinet-ipam"},
		},
		Entrypoint: []string{"/usr/local/bin/multinetd"},
		User:       "0:0",
	},
	{
		Name:        "webhook",
		Description: "multinet admission webhook and multinet-ipam's cross-node cleanup",
		Files: []File{
			{"multinet-webhook", "/usr/local/bin/multinet-webhook"},
			// The multinet-ipam-cleanup Deployment (deploy/base/ipam-cleanup.yaml):
			// same needs (API server only, non-root).
			{"multinet-ipam-cleanup", "/usr/local/bin/multinet-ipam-cleanup"},
		},
		Entrypoint: []string{"/usr/local/bin/multinet-webhook"},
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
	},
	{
		Name:        "deviceplugin",
		Description: "multinet reference network device plugin",
		Files:       []File{{"multinet-deviceplugin", "/usr/local/bin/multinet-deviceplugin"}},
		Entrypoint:  []string{"/usr/local/bin/multinet-deviceplugin"},
		User:        "0:0",
	},
	{
		Name:        "dra-driver",
		Description: "multinet DRA driver: the network device pools through Dynamic Resource Allocation",
		Files:       []File{{"multinet-dra-driver", "/usr/local/bin/multinet-dra-driver"}},
		Entrypoint:  []string{"/usr/local/bin/multinet-dra-driver"},
		User:        "0:0",
	},
	// CoreDNS, the local cluster's DNS (hack/lib/coredns.sh builds the
	// binary from the module proxy). The manifest passes -conf; it binds
	// port 53 as nonroot through the pod sysctl
	// net.ipv4.ip_unprivileged_port_start=0, without capabilities.
	{
		Name:        "coredns",
		Description: "CoreDNS for multinet's local test cluster",
		Title:       "coredns",
		Files:       []File{{"coredns", "/coredns"}},
		Entrypoint:  []string{"/coredns"},
		User:        fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		OnRequest:   true,
	},
}

// Meta is what goes into every image's config besides its spec.
type Meta struct {
	Version  string // org.opencontainers.image.version
	Revision string // org.opencontainers.image.revision (git commit)
	Source   string // org.opencontainers.image.source
	Arch     string // GOARCH of the binaries
	Created  time.Time
}

// SBOMDir is where an image carries the SBOM of each of its binaries:
// <SBOMDir>/<binary>.cdx.json (CycloneDX JSON, made by cyclonedx-gomod from
// the binary's Go build information; hack/images.sh).
const SBOMDir = "/usr/share/sbom"

// buildImage returns the image for spec: one layer holding the binaries
// (content from bins, keyed by File.Binary), their SBOMs when sboms has
// them (keyed by File.Binary, at SBOMDir), /etc/passwd and /etc/group
// with root and nonroot, /tmp, /run and /var/run -> /run; the config sets entrypoint, user,
// platform and OCI labels. Timestamps come from meta.Created only, so the
// same binaries give the same digest.
func buildImage(spec Spec, bins, sboms map[string][]byte, meta Meta) (v1.Image, error) {
	layerTar, err := rootfsTar(spec, bins, sboms, meta.Created)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", spec.Name, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "multinet hack/tools/images", Created: v1.Time{Time: meta.Created}},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: append layer: %w", spec.Name, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Name, err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = meta.Arch
	cfg.Created = v1.Time{Time: meta.Created}
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.Cmd = nil
	cfg.Config.User = spec.User
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	title := spec.Title
	if title == "" {
		title = "multinet-" + strings.TrimPrefix(spec.Name, "multinet-")
	}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": spec.Description,
		"org.opencontainers.image.version":     meta.Version,
		"org.opencontainers.image.revision":    meta.Revision,
		"org.opencontainers.image.source":      meta.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("image %s: set config: %w", spec.Name, err)
	}
	return img, nil
}

// rootfsTar returns the layer's tar stream: directories first (parents
// before children), then symlinks, then files, each group sorted, owned by root, with fixed times.
func rootfsTar(spec Spec, bins, sboms map[string][]byte, mtime time.Time) ([]byte, error) {
	files := map[string]tarFile{
		"etc/passwd": {mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))},
		"etc/group":  {mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot))},
	}
	dirs := map[string]int64{"tmp": 0o1777, "etc": 0o755, "root": 0o700, "run": 0o755, "var": 0o755}
	// /var/run is /run, as on the hosts: host paths under either name
	// (netns, device-info, sockets) can be mounted at the same path.
	links := map[string]string{"var/run": "../run"}
	for _, f := range spec.Files {
		data, ok := bins[f.Binary]
		if !ok {
			return nil, fmt.Errorf("binary %s: not provided", f.Binary)
		}
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		if !path.IsAbs(f.Path) || name == "" || strings.HasPrefix(name, "..") {
			return nil, fmt.Errorf("binary %s: path %q must be absolute", f.Binary, f.Path)
		}
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("binary %s: path %q used twice", f.Binary, f.Path)
		}
		files[name] = tarFile{mode: 0o755, data: data}
		if sbom, ok := sboms[f.Binary]; ok {
			files[strings.TrimPrefix(path.Join(SBOMDir, f.Binary+".cdx.json"), "/")] = tarFile{mode: 0o644, data: sbom}
		}
	}
	for name := range files {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range sortedKeys(dirs) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: dirs[d], ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("tar %s: %w", d, err)
		}
	}
	for _, name := range sortedKeys(links) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: links[name], Mode: 0o777, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("tar %s: %w", name, err)
		}
	}
	for _, name := range sortedKeys(files) {
		f := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("tar %s: %w", name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return buf.Bytes(), nil
}

type tarFile struct {
	mode int64
	data []byte
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
