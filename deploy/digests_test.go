package deploy_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/internal/render/manifests"
)

// TestDefaultOverlayPinsDigests: given a digest per image (make manifests
// IMAGE_DIGESTS=<file>), deploy/overlays/default renders every container
// of every DaemonSet and Deployment, init containers too, as
// <repository>@sha256:<digest> of its image; without digests it keeps the
// overlay's tags. A digest file that misses an image is refused.
func TestDefaultOverlayPinsDigests(t *testing.T) {
	var lines strings.Builder
	want := map[string]string{}
	for i, name := range manifests.Images {
		ref := fmt.Sprintf("registry.example/multinet/%s@sha256:%064x", name, i+1)
		want["multinet/"+name] = ref
		fmt.Fprintf(&lines, "%s %s\n", name, ref)
	}
	d, err := manifests.ParseDigests(strings.NewReader(lines.String()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := manifests.Render("overlays/default", d)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		var spec corev1.PodSpec
		var name string
		switch meta.Kind {
		case "DaemonSet":
			var ds appsv1.DaemonSet
			mustUnmarshal(t, doc, &ds)
			spec, name = ds.Spec.Template.Spec, ds.Name
		case "Deployment":
			var dp appsv1.Deployment
			mustUnmarshal(t, doc, &dp)
			spec, name = dp.Spec.Template.Spec, dp.Name
		default:
			continue
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			n++
			ok := false
			for _, ref := range want {
				ok = ok || c.Image == ref
			}
			if !ok || !strings.Contains(c.Image, "@sha256:") {
				t.Errorf("%s %s/%s: image %q, want one of the given digests", meta.Kind, name, c.Name, c.Image)
			}
		}
	}
	if n < 5 {
		t.Fatalf("only %d containers rendered", n)
	}

	plain, err := manifests.Render("overlays/default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "@sha256:") || !strings.Contains(string(plain), "image: multinet/webhook:latest") {
		t.Error("without digests the overlay does not keep its tags")
	}
	if _, err := manifests.ParseDigests(strings.NewReader("webhook registry.example/multinet/webhook@sha256:" + strings.Repeat("a", 64) + "\n")); err == nil || !strings.Contains(err.Error(), "no digest for image multinetd") {
		t.Errorf("a digest file without multinetd: %v", err)
	}
	if _, err := manifests.ParseDigests(strings.NewReader("webhook registry.example/multinet/webhook:v1\n")); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("a tag instead of a digest: %v", err)
	}
}

func mustUnmarshal(t *testing.T, doc string, into any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(doc), into); err != nil {
		t.Fatal(err)
	}
}
