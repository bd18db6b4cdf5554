package attach

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// ADD returns before its record's background group commit ran (held here);
// multinetd then dies. The record is complete on disk: a new engine over a
// new store of the same directory (the restarted multinetd) finds it, and
// its DEL tears down every attachment (the delegates' DEL run, the leases
// are released) and removes it (docs/decisions/state.md "Group commit").
func TestAddRecordSurvivesRestartBeforeGroupCommit(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	dir := filepath.Join(t.TempDir(), "records")
	held, err := state.OpenStore(dir, state.Options{BeforeGroupCommit: func() { <-gate }})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *envOptions) { o.Store = held })
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	const id = "ctr-group-commit"
	e.add(id, pod)
	if n := held.Unsynced(); n != 1 {
		t.Fatalf("records waiting for the group commit after ADD returned: %d, want 1 (the final record)", n)
	}
	e.wantLeases(e.defaultNet, 1)
	e.wantLeases("net-a", 1)

	// The restarted multinetd: a new store and engine on the same directory.
	restarted, err := state.NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := restarted.Load(id)
	if err != nil {
		t.Fatalf("the restarted daemon cannot read the record: %v", err)
	}
	if !rec.Complete || len(rec.Attachments) != 2 || rec.Attachments[1].Phase != state.PhaseAdded {
		t.Fatalf("record read after the restart is not the final one: %+v", rec)
	}
	opts := e.eng.opts
	opts.Store = restarted
	eng, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.exec.reset()
	e.eng = eng
	e.del(id, pod)
	if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, []string{"net1", "eth0"}) {
		t.Errorf("delegate DELs after the restart: %v, want [net1 eth0]", got)
	}
	e.wantLeases(e.defaultNet, 0)
	e.wantLeases("net-a", 0)
	if _, err := restarted.Load(id); err == nil {
		t.Error("record still there after DEL")
	}
}

// stubDelegate answers every delegate ADD at once with a result naming one
// interface and one address, and every other command with nothing: an
// engine on it does all of its own work (plan, records, network-status,
// Events, libcni) and none of the delegates'.
type stubDelegate struct{}

func (stubDelegate) ExecPlugin(_ context.Context, _ string, stdin []byte, environ []string) ([]byte, error) {
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["CNI_COMMAND"] != "ADD" {
		return nil, nil
	}
	return fmt.Appendf(nil, `{"cniVersion":%q,"interfaces":[{"name":%q,"sandbox":%q}],"ips":[{"address":"10.9.0.2/24","interface":0}]}`,
		conf.CNIVersion, env["CNI_IFNAME"], env["CNI_NETNS"]), nil
}

func (stubDelegate) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

func (stubDelegate) Decode(b []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(b)
}

// BenchmarkAddOwnWork is multinetd's own work in one ADD of a pod with the
// default network and two NADs (plan, the two record saves, network-status,
// Events, libcni), the delegates answering at once (stubDelegate), with the
// final record fsynced before ADD returns (records=each) or by the
// background group commit (records=background), network-status written
// before ADD returns or after (a fake API answering at once). The DEL of
// each iteration is not timed.
func BenchmarkAddOwnWork(b *testing.B) {
	for _, mode := range []state.SyncMode{state.SyncEach, state.SyncBackground} {
		for _, async := range []bool{false, true} {
			st := "sync"
			if async {
				st = "async"
			}
			b.Run(fmt.Sprintf("records=%s/status=%s", mode, st), func(b *testing.B) {
				store, err := state.OpenStore(filepath.Join(b.TempDir(), "records"), state.Options{Sync: mode})
				if err != nil {
					b.Fatal(err)
				}
				e := newEnv(b, func(o *envOptions) {
					o.Store = store
					o.AsyncStatus = async
				})
				e.exec.Exec = stubDelegate{}
				e.bridgeNAD("net-a")
				e.bridgeNAD("net-b")
				pod := e.podWithNetworks("net-a,net-b")
				e.pods.add(pod)
				id := "ctr-" + cnitest.UniqueName("")
				for b.Loop() {
					e.add(id, pod)
					b.StopTimer()
					if err := e.pub.Wait(context.Background()); err != nil {
						b.Fatal(err)
					}
					e.del(id, pod)
					b.StartTimer()
				}
			})
		}
	}
}

// mergePatcher is a StatusWriter doing what kube.StatusPatcher does in one
// attempt: a JSON merge PATCH of the pod's status subresource carrying the
// annotation and the UID precondition.
type mergePatcher struct{ client kubernetes.Interface }

func (m mergePatcher) PatchAnnotation(ctx context.Context, namespace, name, uid, key, value string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	_, err = m.client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// BenchmarkAddOwnWorkRealAPI is BenchmarkAddOwnWork (records=background)
// with network-status PATCHed to a real kube-apiserver and etcd
// (internal/testing/apiservertest): status=sync is multinetd's own work plus the
// PATCH round trip, status=async its own work alone, the PATCH following
// after ADD returned (not timed).
func BenchmarkAddOwnWorkRealAPI(b *testing.B) {
	srv := apiservertest.Shared(b)
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	for _, async := range []bool{false, true} {
		st := "sync"
		if async {
			st = "async"
		}
		b.Run("status="+st, func(b *testing.B) {
			e := newEnv(b, func(o *envOptions) {
				o.Status = mergePatcher{admin}
				o.AsyncStatus = async
			})
			e.exec.Exec = stubDelegate{}
			e.bridgeNAD("net-a")
			e.bridgeNAD("net-b")
			p, err := admin.CoreV1().Pods(podNS).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "bench-" + cnitest.UniqueName(""), Namespace: podNS,
					Annotations: map[string]string{selection.NetworksAnnotation: "net-a,net-b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = admin.CoreV1().Pods(podNS).Delete(ctx, p.Name, metav1.DeleteOptions{}) })
			e.pods.add(p)
			id := "ctr-" + cnitest.UniqueName("")
			for b.Loop() {
				e.add(id, p)
				b.StopTimer()
				if err := e.pub.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				e.del(id, p)
				b.StartTimer()
			}
		})
	}
}
