package policy

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/multinet/multinet/pkg/spec/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const networkStatus = `[
 {"name": "kindnet", "interface": "eth0", "ips": ["10.244.1.5"], "default": true},
 {"name": "prod/net-a", "interface": "net1", "ips": ["10.0.0.7/24", "fd00::7"]},
 {"name": "prod/dpdk", "interface": "net2", "device-info": {"type": "vhost-user", "version": "1.1.0", "vhost-user": {"mode": "server", "path": "/var/run/vhost.sock"}}},
 {"name": "prod/vf", "ips": ["10.5.0.7"]}
]`

func podObject(phase corev1.PodPhase, networkStatus string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "p", Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{status.Annotation: networkStatus}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}}},
			Containers:     []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "sql", ContainerPort: 5432, Protocol: corev1.ProtocolTCP}, {ContainerPort: 22}}}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestPodFromObject(t *testing.T) {
	got, err := PodFromObject(podObject(corev1.PodRunning, networkStatus))
	if err != nil {
		t.Fatal(err)
	}
	want := Pod{Namespace: "prod", Name: "p", Labels: map[string]string{"app": "db"},
		Ports: []NamedPort{{Name: "metrics", Port: 9100}, {Name: "sql", Protocol: corev1.ProtocolTCP, Port: 5432}},
		Attachments: []Attachment{
			{Network: types.NamespacedName{Namespace: "prod", Name: "net-a"}, Interface: "net1", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("fd00::7")}},
			{Network: types.NamespacedName{Namespace: "prod", Name: "dpdk"}, Interface: "net2", NoKernelInterface: true},
			{Network: types.NamespacedName{Namespace: "prod", Name: "vf"}, IPs: []netip.Addr{netip.MustParseAddr("10.5.0.7")}, NoKernelInterface: true},
		}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		if got, err := PodFromObject(podObject(phase, networkStatus)); err != nil || got.Attachments != nil {
			t.Errorf("phase %s: attachments %+v, %v; want none", phase, got.Attachments, err)
		}
	}
	if _, err := PodFromObject(podObject(corev1.PodRunning, `{"name": "x"}`)); err == nil {
		t.Error("network-status that is not a list: no error")
	}
}
