package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/status"
)

// hotPlugPod is the running pod of the hot-plug phase.
const hotPlugPod = "hotplug"

// hotPlugResult is the hot-plug phase's measurements: from the annotation
// PATCH to the interface present in (or gone from) the pod's network
// namespace, and to the pod's network-status listing the change.
type hotPlugResult struct {
	toInterface, toStatus dist
}

// hotPlugPhase measures hot-plug (docs/hotplug.md): one running pod (a real
// sandbox, attached by the runtime) selecting the first bench network gets
// the second added and removed in turn, o.hotPlugOps times.
func (b *bench) hotPlugPhase(ctx context.Context) error {
	c, first, second := b.c, b.nets[0].name, b.nets[1].name
	if err := c.runPod(ctx, hotPlugPod, first); err != nil {
		return err
	}
	defer func() {
		if err := c.deletePodAndRecord(context.WithoutCancel(ctx), hotPlugPod, b.recordsDir()); err != nil {
			logf("warning: hot-plug pod: %v", err)
		}
	}()
	nsPath, err := b.podNetns(hotPlugPod)
	if err != nil {
		return err
	}
	h, err := netnsHandle(nsPath)
	if err != nil {
		return err
	}
	defer h.Close()

	r := &b.res.hotPlug
	for i := range b.o.hotPlugOps {
		networks, present := first+","+second, true
		want := []string{"eth0", "net1", "net2"}
		if i%2 == 1 {
			networks, present, want = first, false, []string{"eth0", "net1"}
		}
		time.Sleep(b.o.pause)
		toIf, toSt, err := c.timeHotPlug(ctx, h, networks, "net2", present, want)
		if err != nil {
			return fmt.Errorf("hot-plug %d (%s): %w", i, networks, err)
		}
		r.toInterface = append(r.toInterface, toIf)
		r.toStatus = append(r.toStatus, toSt)
	}
	return nil
}

// timeHotPlug PATCHes the pod's networks annotation and returns how long
// until interface ifName is present (or absent) in the pod, seen through h,
// and until network-status lists exactly the interfaces want.
func (c *cluster) timeHotPlug(ctx context.Context, h *netlink.Handle, networks, ifName string, present bool, want []string) (toIf, toSt time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"k8s.v1.cni.cncf.io/networks": networks}}})
	start := time.Now()
	if _, err := c.kube.CoreV1().Pods(c.ns).Patch(ctx, hotPlugPod, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return 0, 0, err
	}
	ifDone := make(chan error, 1)
	go func() {
		for {
			_, lerr := h.LinkByName(ifName)
			if (lerr == nil) == present {
				toIf = time.Since(start)
				ifDone <- nil
				return
			}
			select {
			case <-ctx.Done():
				ifDone <- fmt.Errorf("interface %s present=%v: %w", ifName, present, ctx.Err())
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err = wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := c.kube.CoreV1().Pods(c.ns).Get(ctx, hotPlugPod, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		list, err := status.Decode(p.Annotations[status.Annotation])
		if err != nil {
			return false, nil
		}
		var got []string
		for _, s := range list {
			got = append(got, s.Interface)
		}
		return slices.Equal(got, want), nil
	})
	toSt = time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("network-status never listed %v: %w", want, err)
	}
	if err := <-ifDone; err != nil {
		return 0, 0, err
	}
	return toIf, toSt, nil
}

// runPod creates a pod that runs (busybox sleeping) selecting networks
// and waits until it runs with network-status.
func (c *cluster) runPod(ctx context.Context, name, networks string) error {
	if _, err := c.kube.CoreV1().Pods(c.ns).Create(ctx, c.runningPod(name, labels(), networks), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.kube.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Annotations[status.Annotation] != "", nil
	})
}

// runningPod is a pod the kubelet runs on the node (busybox sleeping),
// with labels, selecting networks.
func (c *cluster) runningPod(name string, l map[string]string, networks string) *corev1.Pod {
	var grace int64
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l,
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": networks}},
		Spec: corev1.PodSpec{
			NodeName:                      c.node,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: c.image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "3600"}}},
		},
	}
}

// deletePodAndRecord deletes pod name and waits until multinetd has no
// record of it any more (its sandbox torn down: nothing left in the bench
// networks' host-local dir).
func (c *cluster) deletePodAndRecord(ctx context.Context, name, recordsDir string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.kube.CoreV1().Pods(c.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
		_, err := findRecord(recordsDir, c.ns, name)
		return errors.Is(err, os.ErrNotExist), nil
	})
}

// recordsDir is multinetd's attachment record directory.
func (b *bench) recordsDir() string {
	return filepath.Join(b.e.clusterDir, "multinet", "state", "records")
}

// podNetns returns the network namespace path of pod name's sandbox, from
// multinetd's record.
func (b *bench) podNetns(name string) (string, error) {
	if b.e.clusterDir == "" {
		return "", errors.New("MULTINET_CLUSTER_DIR not set: multinetd's records cannot be read")
	}
	rec, err := findRecord(b.recordsDir(), b.c.ns, name)
	if err != nil {
		return "", fmt.Errorf("the record of pod %s: %w", name, err)
	}
	return rec.Netns, nil
}

// findRecord returns the complete record of pod ns/name in dir;
// os.ErrNotExist when there is none.
func findRecord(dir, ns, name string) (*state.Record, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r state.Record
		if json.Unmarshal(b, &r) == nil && r.PodNamespace == ns && r.PodName == name {
			return &r, nil
		}
	}
	return nil, os.ErrNotExist
}

// netnsHandle returns a netlink handle in the network namespace at path.
func netnsHandle(path string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return h, nil
}
