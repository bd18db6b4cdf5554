// Package manifests renders a kustomize overlay of deploy/ (what `kubectl
// apply -k` applies) with multinet's images pinned by digest: make manifests
// IMAGE_DIGESTS=<file> (hack/tools/manifests).
package manifests

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Images are multinet's images, as deploy/ names them: multinet/<name>.
var Images = []string{"multinetd", "webhook", "deviceplugin", "dra-driver"}

// Digests maps an image name of Images to its pinned reference
// "<repository>@sha256:<64 hex>".
type Digests map[string]string

var pinned = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)

// ParseDigests reads "<name> <repository>@sha256:<hex>" lines (the format of
// _output/images/digests.txt, written by make images); '#' starts a comment.
// Errors name the line: an unknown image, a reference without a sha256
// digest, an image given twice, or one of Images missing.
func ParseDigests(r io.Reader) (Digests, error) {
	d := Digests{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
			return nil, fmt.Errorf("line %d: want \"<image> <repository>@sha256:<digest>\", got %q", n, line)
		case !slices.Contains(Images, f[0]):
			return nil, fmt.Errorf("line %d: unknown image %q (multinet's are %s)", n, f[0], strings.Join(Images, ", "))
		case !pinned.MatchString(f[1]):
			return nil, fmt.Errorf("line %d: image %s: %q is not <repository>@sha256:<64 hex digits>", n, f[0], f[1])
		case d[f[0]] != "":
			return nil, fmt.Errorf("line %d: image %s given twice", n, f[0])
		}
		d[f[0]] = f[1]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, name := range Images {
		if d[name] == "" {
			return nil, fmt.Errorf("no digest for image %s", name)
		}
	}
	return d, nil
}

// ReadDigests is ParseDigests of a file.
func ReadDigests(path string) (Digests, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := ParseDigests(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Render builds the kustomize overlay in overlayDir; with digests, through
// an overlay of its own whose images entries set each multinet/<name> to
// its repository and digest (kustomize writes <repository>@sha256:...,
// dropping the tag), and then checks that every multinet image of the
// output is pinned. It returns the multi-document YAML.
func Render(overlayDir string, digests Digests) ([]byte, error) {
	dir, err := filepath.Abs(overlayDir)
	if err != nil {
		return nil, err
	}
	if len(digests) > 0 {
		tmp, err := os.MkdirTemp("", "multinet-manifests-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		type image struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			Digest  string `json:"digest"`
		}
		k := struct {
			APIVersion string   `json:"apiVersion"`
			Kind       string   `json:"kind"`
			Resources  []string `json:"resources"`
			Images     []image  `json:"images"`
		}{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization"}
		// kustomize takes no absolute base.
		rel, err := filepath.Rel(tmp, dir)
		if err != nil {
			return nil, err
		}
		k.Resources = []string{rel}
		for _, name := range Images {
			ref, digest, _ := strings.Cut(digests[name], "@")
			k.Images = append(k.Images, image{Name: "multinet/" + name, NewName: ref, Digest: digest})
		}
		b, err := yaml.Marshal(k)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), b, 0o644); err != nil {
			return nil, err
		}
		dir = tmp
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", overlayDir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		return nil, err
	}
	if len(digests) > 0 {
		for _, want := range digests {
			if !strings.Contains(string(out), "image: "+want+"\n") {
				return nil, fmt.Errorf("kustomize build %s: no container runs %s (does the overlay name multinet/<image>?)", overlayDir, want)
			}
		}
		for _, line := range strings.Split(string(out), "\n") {
			if img, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), "image: "); ok && !pinned.MatchString(img) {
				return nil, fmt.Errorf("kustomize build %s: image %s is not pinned by digest", overlayDir, img)
			}
		}
	}
	return out, nil
}
