package clusterenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "env")
	body := "# Written by hack/cluster-up.sh\n\nexport KUBECONFIG=/x/kubeconfig\nexport NODE_IP='10.249.0.1'\nPLAIN=\"v\"\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"KUBECONFIG": "/x/kubeconfig", "NODE_IP": "10.249.0.1", "PLAIN": "v"}
	if len(env) != len(want) {
		t.Fatalf("Read = %v, want %v", env, want)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if err := os.WriteFile(p, []byte("export BROKEN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p); err == nil {
		t.Error("a line without = was accepted")
	}
}
