// Package netconf decides which CNI configuration list an attachment runs and
// how it is invoked: NetworkAttachmentDefinition → CNI config list (multi-net
// spec v1.3 §3.4), name injection (§3.4.2), capabilities → runtimeConfig
// (§4.1.2.1.x, CNI CONVENTIONS), args.cni (§4.1.2.1.6), interface names
// (§4.2.1) and the default network's runtimeConfig (§7.5).
//
// The package is pure: it reads CNI config files from a directory when asked
// (ConfDir) but never talks to the API server, enters a network namespace or
// executes a plugin. Its output is ready for libcni: a *libcni.NetworkConfigList
// and the libcni.RuntimeConf.CapabilityArgs that libcni filters per plugin.
//
// Every *libcni.NetworkConfigList returned by this package is self-contained
// (its Bytes, re-parsed with libcni.NetworkConfFromBytes, give the same
// plugins) and must be treated as read-only: lists may be shared between
// callers and goroutines.
package netconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"
)

// ShimType is the CNI plugin type of multinet's own shim. A delegate config
// naming it would make multinet call itself, so Resolve rejects it and ConfDir
// skips files that use it.
const ShimType = "multinet-shim"

// ErrNotFound is wrapped by ConfigSource.Lookup (and so by Resolve) when no CNI
// config has the requested network name (spec §3.4.1 rule 4).
var ErrNotFound = errors.New("no CNI config with that network name")

// ConfigSource finds on-disk CNI configs by network name (spec §3.4.1 rules 2
// and 3). ConfDir is the implementation; tests may use any other.
type ConfigSource interface {
	// Lookup returns the config list whose "name" is name: a configlist file
	// first, else a single-config file converted to a one-plugin list. It
	// returns an error wrapping ErrNotFound when there is none.
	Lookup(name string) (*libcni.NetworkConfigList, error)
}

// ConfigError is a CNI config that cannot be used. Source says where the
// config came from ("spec.config", a file path, ...), Field names the
// offending field (e.g. "cniVersion", "plugins[1].type").
type ConfigError struct {
	// NAD is the NetworkAttachmentDefinition "namespace/name", empty for a
	// config not read for a NAD (e.g. the default network's file).
	NAD    string
	Source string
	Field  string
	Err    error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.NAD != "" {
		b.WriteString("NetworkAttachmentDefinition ")
		b.WriteString(e.NAD)
		b.WriteString(": ")
	}
	b.WriteString(e.Source)
	if e.Field != "" {
		b.WriteString(": field ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Resolve returns the CNI config list that attachments to the
// NetworkAttachmentDefinition nadNamespace/nadName run (spec §3.4.1):
//
//  1. specConfig (the NAD's spec.config) when it is not empty: a single CNI
//     config (no "plugins" key) becomes a one-plugin list; a missing or empty
//     "name" is set to nadName (§3.4.2);
//  2. else the on-disk configlist, 3. else the on-disk config, whose "name" is
//     nadName, found through dir (which may be nil when there is no directory);
//  4. else an error wrapping ErrNotFound that names the NAD.
//
// The returned list has a name, a cniVersion that libcni supports
// (ImpliedCNIVersion when the config declares none, as libcni reads it), and every
// plugin a "type" without path separators; libcni copies the list's name and
// cniVersion into each plugin when it runs it (§7.1). Every error names the
// NAD; an unusable spec.config gives a *ConfigError whose Field names the
// offending field. The list is read-only. Resolver memoizes this on the hot
// path.
func Resolve(nadNamespace, nadName, specConfig string, dir ConfigSource) (*libcni.NetworkConfigList, error) {
	key := nadNamespace + "/" + nadName
	if specConfig != "" {
		list, _, err := ResolveSpecConfig(nadNamespace, nadName, specConfig)
		return list, err
	}
	if dir == nil {
		return nil, &ConfigError{NAD: key, Source: "spec.config", Err: fmt.Errorf("empty and no CNI config directory to look up network %q: %w", nadName, ErrNotFound)}
	}
	list, err := dir.Lookup(nadName)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, &ConfigError{NAD: key, Source: "spec.config", Err: fmt.Errorf("empty, and %w", err)}
		}
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s: on-disk CNI config: %w", key, err)
	}
	return list, nil
}

// ResolveSpecConfig is Resolve's rule 1 for a non-empty specConfig (the same
// validation, the same list), and also returns warnings: what the list runs
// with but its author probably did not mean, each a *ConfigError naming the
// field (a missing cniVersion, run as ImpliedCNIVersion). Errors: as Resolve.
func ResolveSpecConfig(nadNamespace, nadName, specConfig string) (*libcni.NetworkConfigList, []*ConfigError, error) {
	o := parseOptions{nad: nadNamespace + "/" + nadName, source: "spec.config", shimType: ShimType}
	list, implied, err := parseConfig([]byte(specConfig), nadName, o)
	if err != nil {
		return nil, nil, err
	}
	var warnings []*ConfigError
	if implied {
		warnings = append(warnings, &ConfigError{NAD: o.nad, Source: o.source, Field: "cniVersion", Err: errImpliedVersion})
	}
	return list, warnings, nil
}

// ImpliedCNIVersion is the version of a CNI config that declares none (no
// "cniVersion", null or ""): libcni and the plugins built on it read such a
// config as CNI 0.1.0 (version.ParseVersion: "no version declared ==
// v0.1.0"; create.DecodeVersion; CNIConfig.validatePlugin), and so does
// Multus, which hands the config to libcni. Resolve writes it into the list
// (docs/decisions/netconf.md).
const ImpliedCNIVersion = "0.1.0"

var errImpliedVersion = fmt.Errorf("missing: the plugins run it as CNI %s, as libcni does (no CHECK, results without interfaces); set the version the plugins implement, e.g. \"1.0.0\"", ImpliedCNIVersion)

// parseOptions tune parseConfig for where the bytes came from.
type parseOptions struct {
	nad      string // NAD key for errors, may be empty
	source   string // "spec.config" or a file path, for errors
	shimType string // plugin type to reject ("" = none)
	// forceList parses the bytes as a configlist even without a "plugins"
	// key (a .conflist file: plugins may live in a sub-directory).
	forceList bool
}

func (o parseOptions) errorf(field string, format string, args ...any) error {
	return &ConfigError{NAD: o.nad, Source: o.source, Field: field, Err: fmt.Errorf(format, args...)}
}

// parseConfig turns CNI config or configlist bytes into a validated config
// list, injecting defaultName when "name" is missing or empty (§3.4.2; pass ""
// to require a name). A config that declares no cniVersion gets
// ImpliedCNIVersion, and implied says so.
func parseConfig(data []byte, defaultName string, o parseOptions) (*libcni.NetworkConfigList, bool, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, false, o.errorf("", "not a JSON object: %w", err)
	}
	if top == nil {
		return nil, false, o.errorf("", "not a JSON object: null")
	}

	name, injectName, err := configName(top, defaultName, o)
	if err != nil {
		return nil, false, err
	}

	var listBytes []byte
	_, isList := top["plugins"]
	single := !(isList || o.forceList)
	implied := false
	if single {
		if listBytes, implied, err = singleAsList(data, top, name, injectName, o); err != nil {
			return nil, false, err
		}
	} else {
		listBytes = data
		if injectName {
			top["name"] = mustMarshal(name)
			if listBytes, err = json.Marshal(top); err != nil {
				return nil, false, o.errorf("", "re-encode: %w", err)
			}
		}
	}

	list, err := libcni.NetworkConfFromBytes(listBytes)
	if err != nil {
		return nil, false, o.errorf(listErrorField(err, single), "%w", err)
	}
	if list.CNIVersion == "" && !single {
		// A list without cniVersion (or with only cniVersions newer than
		// libcni): libcni runs it with "", that is 0.1.0. Write the version
		// into the list so that everything downstream (records, result
		// conversion, the default network's version) sees a real one.
		top["name"] = mustMarshal(name)
		top["cniVersion"] = mustMarshal(ImpliedCNIVersion)
		if listBytes, err = json.Marshal(top); err != nil {
			return nil, false, o.errorf("", "re-encode: %w", err)
		}
		if list, err = libcni.NetworkConfFromBytes(listBytes); err != nil {
			return nil, false, o.errorf(listErrorField(err, single), "%w", err)
		}
		implied = true
	}
	if err := validateList(list, o, single); err != nil {
		return nil, false, err
	}
	return list, implied, nil
}

// configName is the config's "name", or defaultName (inject: it must be
// written into the config) when it has none. Errors: no name and no
// defaultName, a name that is not a string or not a valid network name.
func configName(top map[string]json.RawMessage, defaultName string, o parseOptions) (name string, inject bool, err error) {
	name, err = rawString(top, "name")
	if err != nil {
		return "", false, o.errorf("name", "%w", err)
	}
	if name == "" {
		if defaultName == "" {
			return "", false, o.errorf("name", "missing")
		}
		name, inject = defaultName, true
	}
	if verr := utils.ValidateNetworkName(name); verr != nil {
		return "", false, o.errorf("name", "%q: %s", name, verr.Msg)
	}
	return name, inject, nil
}

// singleAsList checks what libcni's list parser cannot attribute to a
// field in a single config (data, decoded as top), then wraps it as the
// one plugin of a list named name (written into the plugin too with
// injectName). A config without cniVersion gets ImpliedCNIVersion, and
// implied says so.
func singleAsList(data []byte, top map[string]json.RawMessage, name string, injectName bool, o parseOptions) (list []byte, implied bool, err error) {
	if _, ok := top["type"]; !ok {
		return nil, false, o.errorf("type", "missing")
	}
	ver := top["cniVersion"]
	if v, err := rawString(top, "cniVersion"); err == nil && v == "" {
		// Missing, null or "": libcni's ConfListFromConf reads the
		// plugin's cniVersion as "", run as 0.1.0.
		ver, implied = mustMarshal(ImpliedCNIVersion), true
	}
	plugin := data
	if injectName {
		top["name"] = mustMarshal(name)
		if plugin, err = json.Marshal(top); err != nil {
			return nil, false, o.errorf("", "re-encode: %w", err)
		}
	}
	return wrapSingle(ver, mustMarshal(name), plugin), implied, nil
}

// wrapSingle builds {"cniVersion":v,"name":n,"plugins":[plugin]}.
func wrapSingle(ver, name json.RawMessage, plugin []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(plugin) + len(ver) + len(name) + 48)
	b.WriteString(`{"cniVersion":`)
	b.Write(ver)
	b.WriteString(`,"name":`)
	b.Write(name)
	b.WriteString(`,"plugins":[`)
	b.Write(plugin)
	b.WriteString(`]}`)
	return b.Bytes()
}

// validateList checks what libcni does not: a supported cniVersion (set by
// parseConfig when the config has none), plugin
// types that are plain file names and not multinet's shim. single is true when
// the list wraps one config, whose fields are named without "plugins[0].".
func validateList(list *libcni.NetworkConfigList, o parseOptions, single bool) error {
	if list.CNIVersion == "" {
		return o.errorf("cniVersion", "missing")
	}
	if !slices.Contains(version.All.SupportedVersions(), list.CNIVersion) {
		return o.errorf("cniVersion", "%q is not a CNI version this library supports (%s)", list.CNIVersion, strings.Join(version.All.SupportedVersions(), ", "))
	}
	if len(list.Plugins) == 0 && !o.forceList {
		return o.errorf("plugins", "empty")
	}
	for i, p := range list.Plugins {
		if err := validatePluginType(p.Network.Type, o.shimType); err != nil {
			field := "type"
			if !single {
				field = fmt.Sprintf("plugins[%d].type", i)
			}
			return o.errorf(field, "%w", err)
		}
	}
	return nil
}

// errShimType marks a config that runs multinet's own shim.
var errShimType = errors.New("is multinet's own shim: a delegate must not call multinet again")

func validatePluginType(t, shimType string) error {
	switch {
	case t == "":
		return errors.New("missing")
	case t == "." || t == "..":
		return fmt.Errorf("%q is not a plugin binary name", t)
	case strings.ContainsAny(t, `/\`+"\x00"):
		return fmt.Errorf("%q contains a path separator or NUL: plugins are looked up by name in the CNI bin dirs", t)
	case shimType != "" && t == shimType:
		return fmt.Errorf("%q %w", t, errShimType)
	}
	return nil
}

// pluginIndexRE and pluginFieldRE pick the plugin index and the field out of
// libcni's list-parsing errors ("failed to parse plugin config 1: ... Go
// struct field PluginConf.capabilities ...").
var (
	pluginIndexRE = regexp.MustCompile(`plugin config (\d+)`)
	pluginFieldRE = regexp.MustCompile(`PluginConf\.([A-Za-z0-9_.]+)`)
)

// listErrorField names the field a libcni list-parsing error is about; single
// is true when the list wraps one config, whose fields are top-level.
func listErrorField(err error, single bool) string {
	msg := err.Error()
	if m := pluginIndexRE.FindStringSubmatch(msg); m != nil {
		field := ""
		if f := pluginFieldRE.FindStringSubmatch(msg); f != nil {
			field = f[1]
		} else if strings.Contains(msg, "'type'") {
			field = "type"
		}
		if single {
			return field
		}
		if field == "" {
			return "plugins[" + m[1] + "]"
		}
		return "plugins[" + m[1] + "]." + field
	}
	for _, f := range []string{"cniVersions", "cniVersion", "disableCheck", "disableGC", "loadOnlyInlinedPlugins", "plugins", "name"} {
		if strings.Contains(msg, f) {
			return f
		}
	}
	return ""
}

// rawString decodes top[key] as a JSON string; a missing key or null gives "".
func rawString(top map[string]json.RawMessage, key string) (string, error) {
	raw, ok := top[key]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("not a string: %s", truncate(raw))
	}
	return s, nil
}

func mustMarshal(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}

func truncate(b []byte) string {
	const max = 64
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
