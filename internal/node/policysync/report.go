package policysync

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// reporter posts what cannot be enforced as Warning Events, each once per
// policy generation (and sandbox, for a pod's attachment) on every node
// that meets it: on the pod and on the policy for an attachment of the
// pod (no kernel interface), on the policy alone for a problem of the
// policy (bad input: the part it concerns matches nothing). The messages
// are policy.Problem's, which name the policy, the pod and the network.
type reporter struct {
	events EventSink
	mu     sync.Mutex
	posted map[string]bool // policy|generation|sandbox|reason|interface|message
}

// problems posts the problems not posted before of sandbox id, whose pod
// is pod; policyOf gives a policy object (nil: gone, nothing posted on it).
func (r *reporter) problems(id string, pod *corev1.Pod, policyOf func(types.NamespacedName) *v1beta2.MultiNetworkPolicy, problems []policy.Problem) {
	if r.events == nil {
		return
	}
	for _, pr := range problems {
		pol := policyOf(pr.Policy)
		if pol == nil {
			continue
		}
		ofPod := pod != nil && (pr.Reason == policy.ReasonNoKernelInterface || pr.Interface != "")
		sandbox := ""
		if ofPod {
			sandbox = id
		}
		if !r.first(pr.Policy.String(), pol.Generation, sandbox, pr) {
			continue
		}
		r.events.Warning(pol, pr.Reason, "%s", pr.Message)
		if ofPod {
			r.events.Warning(pod, pr.Reason, "%s", pr.Message)
		}
	}
}

// first reports whether pr of policy key at generation is new for sandbox
// ("" for a problem of the policy), and notes it.
func (r *reporter) first(key string, generation int64, sandbox string, pr policy.Problem) bool {
	k := fmt.Sprintf("%s|%d|%s|%s|%s|%s", key, generation, sandbox, pr.Reason, pr.Interface, pr.Message)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.posted[k] {
		return false
	}
	r.posted[k] = true
	return true
}

// forget drops what was posted for sandbox id (DEL).
func (r *reporter) forget(id string) {
	r.forgetWhere(func(k string) bool { return strings.Split(k, "|")[2] == id })
}

// forgetPolicy drops what was posted for policy key (deleted).
func (r *reporter) forgetPolicy(key string) {
	r.forgetWhere(func(k string) bool { return strings.HasPrefix(k, key+"|") })
}

func (r *reporter) forgetWhere(drop func(string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.posted {
		if drop(k) {
			delete(r.posted, k)
		}
	}
}
