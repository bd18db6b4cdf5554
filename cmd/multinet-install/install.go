package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/multinet/multinet/internal/process/atomicfile"
)

// installFile copies src to dst so that dst is at every moment either the
// old file or the complete new one (internal/process/atomicfile): the bytes go to a
// temporary file in dst's directory, which is synced and then renamed over
// dst. A running dst (the runtime executing multinet-shim) keeps its inode;
// nothing ever writes into it, so there is no "text file busy". When dst
// already has src's content nothing is written and changed is false.
func installFile(src, dst string, mode os.FileMode) (changed bool, err error) {
	same, err := sameContent(src, dst)
	if err != nil {
		return false, err
	}
	if same {
		return false, nil
	}
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	if err := atomicfile.Write(dst, in, mode); err != nil {
		return false, fmt.Errorf("install: %w", err)
	}
	return true, nil
}

// sameContent reports whether the regular file dst exists with src's bytes.
func sameContent(src, dst string) (bool, error) {
	di, err := os.Stat(dst)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	si, err := os.Stat(src)
	if err != nil {
		return false, err
	}
	if !di.Mode().IsRegular() || di.Size() != si.Size() {
		return false, nil
	}
	a, err := fileHash(src)
	if err != nil {
		return false, err
	}
	b, err := fileHash(dst)
	if err != nil {
		return false, err
	}
	return bytes.Equal(a, b), nil
}

func fileHash(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return h.Sum(nil), nil
}

// installPlugins installs srcDir/<name> as dstDir/<name> for each name,
// returning one line per plugin saying what happened.
func installPlugins(srcDir, dstDir string, names []string) ([]string, error) {
	if fi, err := os.Stat(dstDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("CNI bin dir %s: not a directory (is the host path mounted?): %v", dstDir, err)
	}
	var report []string
	for _, n := range names {
		changed, err := installFile(filepath.Join(srcDir, n), filepath.Join(dstDir, n), 0o755)
		if err != nil {
			return report, err
		}
		what := "unchanged"
		if changed {
			what = "installed"
		}
		report = append(report, fmt.Sprintf("%s: %s", filepath.Join(dstDir, n), what))
	}
	return report, nil
}

// cniConfigExts are the file name endings libcni loads from a conf dir.
var cniConfigExts = []string{".conf", ".conflist", ".json"}

// defaultNetworkConfig returns the first CNI config file of confDir in
// lexical order (the runtime's and multinetd's rule), leaving out skip
// (multinet's own file), or "" when there is none.
func defaultNetworkConfig(confDir, skip string) (string, error) {
	entries, err := os.ReadDir(confDir)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || n == skip || strings.HasPrefix(n, ".") {
			continue
		}
		for _, ext := range cniConfigExts {
			if strings.HasSuffix(n, ext) {
				names = append(names, n)
				break
			}
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	sort.Strings(names)
	return filepath.Join(confDir, names[0]), nil
}

// waitFor calls found every interval until it returns a non-empty string,
// which it returns, or ctx ends. progress is called with the time waited
// every minute or so.
func waitFor(ctx context.Context, interval time.Duration, found func() (string, error), progress func(time.Duration)) (string, error) {
	start := time.Now()
	lastReport := start
	for {
		p, err := found()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if p != "" {
			return p, nil
		}
		if time.Since(lastReport) >= time.Minute {
			lastReport = time.Now()
			progress(time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(interval):
		}
	}
}

// nonEmptyFile is a waitFor condition: path exists and is not empty.
func nonEmptyFile(path string) func() (string, error) {
	return func() (string, error) {
		fi, err := os.Stat(path)
		if err != nil {
			return "", err
		}
		if fi.Size() == 0 {
			return "", nil
		}
		return path, nil
	}
}

// uninstall removes what multinet put on a node: multinet's CNI config
// (first, so the runtime stops calling the shim), the plugins it installed,
// and the daemon's state and socket dirs. Every path is taken below root
// (for `kubectl debug node/...`, which mounts the host at /host). Missing
// paths are fine. It returns the paths removed.
func uninstall(root string, files, dirs []string) ([]string, error) {
	var removed []string
	var errs []error
	for _, p := range files {
		if err := checkAbs(p); err != nil {
			errs = append(errs, err)
			continue
		}
		full := filepath.Join(root, p)
		err := os.Remove(full)
		switch {
		case err == nil:
			removed = append(removed, full)
		case !errors.Is(err, os.ErrNotExist):
			errs = append(errs, err)
		}
	}
	for _, d := range dirs {
		if err := checkAbs(d); err != nil {
			errs = append(errs, err)
			continue
		}
		full := filepath.Join(root, d)
		if _, err := os.Lstat(full); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(full); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, full)
	}
	return removed, errors.Join(errs...)
}

// checkAbs refuses relative paths and the root itself, so a mistyped flag
// cannot remove the wrong tree.
func checkAbs(p string) error {
	c := filepath.Clean(p)
	if !filepath.IsAbs(c) || c == "/" {
		return fmt.Errorf("refusing to remove %q: an absolute path below / is required", p)
	}
	return nil
}
