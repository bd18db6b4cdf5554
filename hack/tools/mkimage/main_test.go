package main

import (
	"archive/tar"
	"errors"
	"io"
	"testing"
)

func TestBuildImage(t *testing.T) {
	fake := []byte("#!not-really-busybox")
	img, err := buildImage(fake, []string{"sh", "sleep", "ip", "sh", "busybox"})
	if err != nil {
		t.Fatalf("buildImage: %v", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform = %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if got := cfg.Config.Cmd; len(got) != 2 || got[0] != "/bin/sleep" || got[1] != "infinity" {
		t.Errorf("Cmd = %q, want [/bin/sleep infinity]", got)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	links := map[string]string{}
	var busybox []byte
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			if _, dup := links[h.Name]; dup {
				t.Errorf("duplicate entry %s", h.Name)
			}
			links[h.Name] = h.Linkname
		case tar.TypeReg:
			if h.Name == "bin/busybox" {
				busybox, _ = io.ReadAll(tr)
			}
		}
	}
	if string(busybox) != string(fake) {
		t.Errorf("bin/busybox = %q, want the input bytes", busybox)
	}
	for _, a := range []string{"bin/sh", "bin/sleep", "bin/ip"} {
		if links[a] != "busybox" {
			t.Errorf("%s -> %q, want busybox", a, links[a])
		}
	}
	if _, ok := links["bin/busybox"]; ok {
		t.Error("bin/busybox must be the binary, not a symlink")
	}
}

func TestBuildImageDeterministic(t *testing.T) {
	a, err := buildImage([]byte("x"), []string{"sh", "ls"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildImage([]byte("x"), []string{"ls", "sh"})
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("same input gave digests %s and %s", da, db)
	}
	c, err := buildImage([]byte("y"), []string{"sh", "ls"})
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc == da {
		t.Error("different busybox gave the same digest")
	}
}

func TestBuildImageNoApplets(t *testing.T) {
	if _, err := buildImage([]byte("x"), nil); err == nil {
		t.Error("empty applet list: got nil error")
	}
}
