package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileContentAndMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		perm fs.FileMode
		opts []Option
		old  bool // path exists before the write, with other content and mode
	}{
		{name: "new 0644", perm: 0o644},
		{name: "new 0600", perm: 0o600},
		{name: "new 0755 (not reduced by the umask)", perm: 0o755},
		{name: "replace 0640", perm: 0o640, old: true},
		{name: "replace NoSync", perm: 0o600, opts: []Option{NoSync()}, old: true},
		{name: "replace TempPrefix", perm: 0o644, opts: []Option{TempPrefix(".tmp-f-")}, old: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if tc.old {
				if err := os.WriteFile(path, []byte("old content, longer than the new"), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte("new"), tc.perm, tc.opts...); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Errorf("content = %q, %v; want %q", got, err, "new")
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tc.perm {
				t.Errorf("mode = %v, want %v", fi.Mode(), tc.perm)
			}
			if names := dirNames(t, dir); len(names) != 1 {
				t.Errorf("directory holds %q, want only f", names)
			}
		})
	}
}

// failingReader yields some bytes, then an error.
type failingReader struct{ done bool }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, errors.New("source broke")
	}
	r.done = true
	return copy(p, "partial"), nil
}

// A write that fails leaves the old content in place and no temporary file,
// whichever step fails.
func TestWriteFailureLeavesOldContentAndNoTemp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		write   func(path string) error
		wantErr string
	}{
		{
			name:    "source fails midway",
			write:   func(path string) error { return Write(path, &failingReader{}, 0o644) },
			wantErr: "source broke",
		},
		{
			name: "rename fails (target is a non-empty directory)",
			write: func(path string) error {
				if err := os.Remove(path); err != nil {
					return err
				}
				if err := os.MkdirAll(filepath.Join(path, "sub"), 0o755); err != nil {
					return err
				}
				return WriteFile(path, []byte("new"), 0o644)
			},
			wantErr: "file exists",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := tc.write(path)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error = %v, want one naming %s and containing %q", err, path, tc.wantErr)
			}
			for _, n := range dirNames(t, dir) {
				if n != "f" {
					t.Errorf("left %s behind", n)
				}
			}
			if fi, _ := os.Stat(path); fi != nil && fi.Mode().IsRegular() {
				if got, _ := os.ReadFile(path); string(got) != "old" {
					t.Errorf("content = %q, want the old content", got)
				}
			}
		})
	}
}

func TestWriteMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	err := WriteFile(path, []byte("x"), 0o644)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error = %v, want fs.ErrNotExist naming %s", err, path)
	}
}

// blockingReader stops after its first bytes until release is closed, so
// that the test can look at the directory during a write.
type blockingReader struct {
	started chan struct{}
	release chan struct{}
	sent    bool
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if !r.sent {
		r.sent = true
		return copy(p, "x"), nil
	}
	close(r.started)
	<-r.release
	return 0, io.EOF
}

// The temporary file lives in the target's directory, named by the prefix.
func TestTempName(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{want: ".f.json.tmp-"},
		{opts: []Option{TempPrefix(".tmp-f.json-")}, want: ".tmp-f.json-"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "f.json")
		r := &blockingReader{started: make(chan struct{}), release: make(chan struct{})}
		errc := make(chan error, 1)
		go func() { errc <- Write(path, r, 0o644, tc.opts...) }()
		<-r.started
		names := dirNames(t, dir)
		close(r.release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if len(names) != 1 || !strings.HasPrefix(names[0], tc.want) || len(names[0]) == len(tc.want) {
			t.Errorf("during the write the directory holds %q, want one file %s<random>", names, tc.want)
		}
		if tc.opts == nil && DefaultTempPrefix(path) != tc.want {
			t.Errorf("DefaultTempPrefix = %q, want %q", DefaultTempPrefix(path), tc.want)
		}
	}
}

// Writers replacing one file at once never let a reader see a partial or
// mixed file: every read is one writer's complete content.
func TestConcurrentWritersNeverExposePartialFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	const writers, rounds = 8, 40
	content := func(w int) []byte { // large enough to take more than one write(2) chunk
		return bytes.Repeat([]byte(fmt.Sprintf("writer %d;", w)), 100000)
	}
	valid := make(map[string]bool, writers)
	for w := range writers {
		valid[string(content(w))] = true
	}
	if err := WriteFile(path, content(0), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := os.ReadFile(path)
			if err != nil {
				readErr <- fmt.Errorf("read during writes: %v", err)
				return
			}
			if !valid[string(got)] {
				readErr <- fmt.Errorf("read a partial or mixed file of %d bytes", len(got))
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				errs <- WriteFile(path, content(w), 0o644, NoSync())
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %q after the writes, want only f", names)
	}
}
