// Package clusterenv reads the env files the local cluster's scripts write
// (hack/cluster-up.sh's _output/cluster/env, hack/cluster-devices.sh's
// devices.env), for the e2e tests and the chaos suite.
package clusterenv

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Read parses the `export KEY=value` lines of the env file at path (blank
// lines and # comments skipped, surrounding quotes removed) into a map.
// Errors: the file cannot be read, or a line has no "=".
func Read(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		env[k] = strings.Trim(v, `"'`)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return env, nil
}
