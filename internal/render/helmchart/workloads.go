package helmchart

import (
	"fmt"
	"strings"
)

// workload templates a DaemonSet's or Deployment's images, pull policies,
// resources and priority class, and multinetd's node layout and the
// webhook's namespace isolation and undeclaredCapabilities arguments.
func (g *gen) workload(o object) error {
	spec, err := path(o, "spec", "template", "spec")
	if err != nil {
		return err
	}
	var comp *component
	for i := range components {
		if c := &components[i]; c.kind == kind(o) && c.name == name(o) {
			comp = c
		}
	}
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := spec[list].([]any)
		for _, c := range cs {
			c := c.(map[string]any)
			if err := g.image(c); err != nil {
				return fmt.Errorf("container %s: %w", c["name"], err)
			}
		}
	}
	if comp == nil {
		return nil
	}
	g.seen[comp.key] = true
	c, err := container(spec, "containers", comp.container)
	if err != nil {
		return err
	}
	cv := &componentValues{Resources: c["resources"]}
	c["resources"] = g.toYAML(".Values." + comp.key + ".resources")
	if pc, ok := spec["priorityClassName"].(string); ok {
		cv.PriorityClassName = pc
		spec["priorityClassName"] = g.inline(".Values." + comp.key + ".priorityClassName")
	}
	g.values.component(comp.key, cv)
	switch comp.key {
	case "multinetd":
		return g.nodeLayout(spec)
	case "webhook":
		return g.webhookArgs(c)
	}
	return nil
}

// image templates a container's image (multinet/<name>:<tag>) and pull policy.
func (g *gen) image(c map[string]any) error {
	ref, _ := c["image"].(string)
	repo, tag, ok := strings.Cut(ref, ":")
	key := imageKeys[strings.TrimPrefix(repo, "multinet/")]
	if !ok || !strings.HasPrefix(repo, "multinet/") || key == "" {
		return fmt.Errorf("image %q is not multinet/<image>:<tag>", ref)
	}
	if err := g.values.image(key, repo, tag); err != nil {
		return err
	}
	c["image"] = g.inline(fmt.Sprintf(`include "multinet.image" .Values.images.%s`, key))
	pp, _ := c["imagePullPolicy"].(string)
	if err := g.values.setOnce(&g.values.ImagePullPolicy, pp, "imagePullPolicy"); err != nil {
		return err
	}
	c["imagePullPolicy"] = g.inline(".Values.imagePullPolicy")
	return nil
}

// nodeLayout templates the CNI dirs of the multinetd DaemonSet: the
// installer's flags and mounts, the daemon's conf dir mount and the
// hostPath volumes (the fields the distribution overlays patch).
func (g *gen) nodeLayout(spec map[string]any) error {
	bin, conf := g.values.Node.generic.CNIBinDirs[0], g.values.Node.generic.CNIConfDir
	binT, confT := g.inline(`include "multinet.cniBinDir" .`), g.inline(`include "multinet.cniConfDir" .`)
	ic, err := container(spec, "initContainers", "install-cni")
	if err != nil {
		return err
	}
	args, _ := ic["args"].([]any)
	if err := replaceString(args, "--cni-bin-dir="+bin, "--cni-bin-dir="+binT); err != nil {
		return fmt.Errorf("install-cni: %w", err)
	}
	if err := replaceString(args, "--cni-conf-dir="+conf, "--cni-conf-dir="+confT); err != nil {
		return fmt.Errorf("install-cni: %w", err)
	}
	for _, m := range []struct {
		c          map[string]any
		vol, value string
		t          string
	}{{ic, "cni-bin", bin, binT}, {ic, "cni-conf", conf, confT}} {
		if err := setNamed(m.c["volumeMounts"], m.vol, m.value, m.t, "mountPath"); err != nil {
			return fmt.Errorf("install-cni: %w", err)
		}
	}
	d, err := container(spec, "containers", "multinetd")
	if err != nil {
		return err
	}
	if err := setNamed(d["volumeMounts"], "cni-conf", conf, confT, "mountPath"); err != nil {
		return fmt.Errorf("multinetd: %w", err)
	}
	if err := setNamed(spec["volumes"], "cni-bin", bin, binT, "hostPath", "path"); err != nil {
		return err
	}
	return setNamed(spec["volumes"], "cni-conf", conf, confT, "hostPath", "path")
}

// webhookArgs templates the webhook's namespace isolation flags and adds
// --undeclared-capabilities when it is not refuse (the default).
func (g *gen) webhookArgs(c map[string]any) error {
	args, _ := c["args"].([]any)
	var ls []string
	want := map[string]bool{"--namespace-isolation": true, "--global-namespaces=": true, "--nad-trust-policy=": true}
	for _, a := range args {
		s, _ := a.(string)
		switch {
		case s == "--namespace-isolation":
			ls = append(ls, "{{- if .Values.namespaceIsolation.enabled }}", "- --namespace-isolation", "{{- end }}")
			delete(want, s)
		case strings.HasPrefix(s, "--global-namespaces="):
			ls = append(ls, `- --global-namespaces={{ join "," .Values.namespaceIsolation.globalNamespaces }}`)
			delete(want, "--global-namespaces=")
		case strings.HasPrefix(s, "--undeclared-capabilities"):
			return fmt.Errorf("webhook: the base sets %s; the chart sets it from undeclaredCapabilities", s)
		default:
			ls = append(ls, "- "+yamlString(s))
			if strings.HasPrefix(s, "--nad-trust-policy=") {
				ls = append(ls, `{{- if ne .Values.undeclaredCapabilities "refuse" }}`,
					"- --undeclared-capabilities={{ .Values.undeclaredCapabilities }}", "{{- end }}")
				delete(want, "--nad-trust-policy=")
			}
		}
	}
	for w := range want {
		return fmt.Errorf("webhook: no argument %s in the base", w)
	}
	c["args"] = g.lines(ls)
	return nil
}

func yamlString(s string) string {
	if strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`") || strings.HasPrefix(s, "-") && strings.ContainsAny(s, " ") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

func path(o map[string]any, keys ...string) (map[string]any, error) {
	m := o
	for _, k := range keys {
		n, ok := m[k].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no %s", strings.Join(keys, "."))
		}
		m = n
	}
	return m, nil
}

func container(spec map[string]any, list, name string) (map[string]any, error) {
	cs, _ := spec[list].([]any)
	for _, c := range cs {
		if c, ok := c.(map[string]any); ok && c["name"] == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no %s %s", list, name)
}

// replaceString replaces the element old of list by new.
func replaceString(list []any, old, new string) error {
	for i, a := range list {
		if a == old {
			list[i] = new
			return nil
		}
	}
	return fmt.Errorf("no argument %s", old)
}

// setNamed sets keys (a path) of the element named name in list to t,
// checking that it was value.
func setNamed(list any, name, value, t string, keys ...string) error {
	l, _ := list.([]any)
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok || m["name"] != name {
			continue
		}
		for _, k := range keys[:len(keys)-1] {
			if m, ok = m[k].(map[string]any); !ok {
				return fmt.Errorf("%s: no %s", name, k)
			}
		}
		last := keys[len(keys)-1]
		if m[last] != value {
			return fmt.Errorf("%s: %s is %v, want %s", name, strings.Join(keys, "."), m[last], value)
		}
		m[last] = t
		return nil
	}
	return fmt.Errorf("no %s", name)
}
