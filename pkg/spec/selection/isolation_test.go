package selection

import (
	"errors"
	"strings"
	"testing"
)

// TestIsolationPolicy: spec §7.4 lets the implementation refuse
// NetworkAttachmentDefinitions a pod may not select.
func TestIsolationPolicy(t *testing.T) {
	tests := []struct {
		name    string
		policy  IsolationPolicy
		podNS   string
		elem    Element
		allowed bool
	}{
		{"disabled allows any", IsolationPolicy{}, "a", Element{Name: "n", Namespace: "b"}, true},
		{"own namespace", IsolationPolicy{Enabled: true}, "a", Element{Name: "n", Namespace: "a"}, true},
		{"empty namespace is the pod's", IsolationPolicy{Enabled: true}, "a", Element{Name: "n"}, true},
		{"other namespace", IsolationPolicy{Enabled: true}, "a", Element{Name: "n", Namespace: "b"}, false},
		{"default is not implicitly global", IsolationPolicy{Enabled: true}, "a", Element{Name: "n", Namespace: "default"}, false},
		{"global namespace", IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default", "shared"}}, "a", Element{Name: "n", Namespace: "shared"}, true},
		{"not in globals", IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default"}}, "a", Element{Name: "n", Namespace: "shared"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(tc.podNS, tc.elem)
			if tc.allowed && err != nil {
				t.Errorf("Check = %v, want allowed", err)
			}
			if !tc.allowed {
				var ie *IsolationError
				if !errors.As(err, &ie) {
					t.Fatalf("Check = %v, want *IsolationError", err)
				}
				if ie.PodNamespace != tc.podNS || ie.Namespace != tc.elem.Namespace {
					t.Errorf("IsolationError %+v does not name both namespaces", ie)
				}
			}
		})
	}
}

func TestIsolationErrorMessage(t *testing.T) {
	p := IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default", "shared"}}
	elems, err := Parse("net-a,other/net-c,default/net-d,x/net-e", "my-ns")
	if err != nil {
		t.Fatal(err)
	}
	err = p.CheckAll("my-ns", elems)
	const want1 = `networks[1]: network "other/net-c" is in namespace "other", which a pod in namespace "my-ns" may not use: ` +
		`namespace isolation allows only the pod's own namespace and the global namespaces "default", "shared" (spec §7.4)`
	if err == nil {
		t.Fatal("CheckAll = nil, want two errors")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || lines[0] != want1 || !strings.HasPrefix(lines[1], `networks[3]: network "x/net-e"`) {
		t.Errorf("CheckAll =\n%v\nwant first line\n%s", err, want1)
	}
	if err := (IsolationPolicy{Enabled: true}).Check("a", Element{Name: "n", Namespace: "b"}); err == nil ||
		err.Error() != `network "b/n" is in namespace "b", which a pod in namespace "a" may not use: namespace isolation allows only the pod's own namespace (spec §7.4)` {
		t.Errorf("Check = %v", err)
	}
	if err := (IsolationPolicy{}).CheckAll("a", elems); err != nil {
		t.Errorf("disabled CheckAll = %v", err)
	}
}
