package netdevplugin

import (
	"strings"
	"testing"
)

func TestOriginRoundTrip(t *testing.T) {
	for _, o := range []origin{
		{Name: "eth3", Up: true},
		{Name: "eth3"},
		{Name: "ens1f0v2", Up: true, Alias: "uplink: rack 4: port 2"},
		{Name: "a;b", Alias: ":"},
	} {
		got, ok := parseOrigin(o.encode())
		if !ok || got != o {
			t.Errorf("parseOrigin(%q) = %+v, %v; want %+v", o.encode(), got, ok, o)
		}
	}
}

func TestParseOrigin(t *testing.T) {
	for alias, want := range map[string]*origin{
		"multinet-orig:eth3":            {Name: "eth3"},
		"multinet-orig:eth3:up:":        {Name: "eth3", Up: true},
		"multinet-orig:eth3:down:x:y":   {Name: "eth3", Alias: "x:y"},
		"multinet-orig:eth3:sideways:x": nil,
		"multinet-orig:":                nil,
		"multinet-orig::up:":            nil,
		"eth3":                          nil,
		"":                              nil,
		"Multinet-orig:eth3":            nil,
	} {
		got, ok := parseOrigin(alias)
		if want == nil {
			if ok {
				t.Errorf("parseOrigin(%q) = %+v, want not ours", alias, got)
			}
			continue
		}
		if !ok || got != *want {
			t.Errorf("parseOrigin(%q) = %+v, %v; want %+v", alias, got, ok, *want)
		}
	}
}

func TestOriginCheck(t *testing.T) {
	if err := (origin{Name: "eth0", Alias: strings.Repeat("a", 200)}).check(); err != nil {
		t.Fatal(err)
	}
	err := (origin{Name: "eth0", Alias: strings.Repeat("a", 250)}).check()
	if err == nil || !strings.Contains(err.Error(), "eth0") {
		t.Fatalf("check of a too long alias: %v", err)
	}
}
