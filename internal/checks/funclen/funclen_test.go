package funclen

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// MaxBodyLines is the longest body a product function may have: the lines
// between its braces, comments and blank lines included.
const MaxBodyLines = 80

// roots are the product's trees, relative to the module root.
var roots = []string{"pkg", "cmd", "internal"}

// generated reports whether dir (slash-separated, relative to the module
// root) holds generated code: the clientset, informers and listers of
// pkg/client.
func generated(dir string) bool {
	for _, g := range []string{"pkg/client/clientset", "pkg/client/informers", "pkg/client/listers"} {
		if dir == g || strings.HasPrefix(dir, g+"/") {
			return true
		}
	}
	return false
}

// funcName is a function's name as the allowlist spells it: Name, or
// Type.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// longFuncs returns the body length of every product function longer than
// MaxBodyLines, keyed "<dir> <name>" (dir relative to root, slashes).
func longFuncs(t *testing.T, root string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	long := map[string]int{}
	for _, r := range roots {
		err := filepath.WalkDir(filepath.Join(root, r), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if d.Name() == "testdata" || generated(rel) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n := fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Body.Lbrace).Line - 1
				if n > MaxBodyLines {
					key := filepath.ToSlash(filepath.Dir(rel)) + " " + funcName(fd)
					long[key] = max(long[key], n)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walking %s: %v", r, err)
		}
	}
	return long
}

// readAllowlist reads long-funcs.txt: "<dir> <name> <body lines>" a line,
// # comments and blank lines ignored.
func readAllowlist(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("allowlist: %v", err)
	}
	defer f.Close()
	allowed := map[string]int{}
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		text := strings.TrimSpace(s.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 3 {
			t.Fatalf("%s:%d: want \"<dir> <name> <body lines>\", got %q", path, line, text)
		}
		n, err := strconv.Atoi(fields[2])
		if err != nil {
			t.Fatalf("%s:%d: body lines %q: %v", path, line, fields[2], err)
		}
		allowed[fields[0]+" "+fields[1]] = n
	}
	if err := s.Err(); err != nil {
		t.Fatalf("allowlist: %v", err)
	}
	return allowed
}

// TestNoLongFunctions fails listing every product function whose body is
// longer than MaxBodyLines and that long-funcs.txt does not list, or that
// has grown past the length listed there.
func TestNoLongFunctions(t *testing.T) {
	long := longFuncs(t, filepath.Join("..", "..", ".."))
	allowed := readAllowlist(t, "long-funcs.txt")
	var bad []string
	for key, n := range long {
		limit, ok := allowed[key]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: %d body lines (at most %d; split it into pieces with one job each)", key, n, MaxBodyLines))
		case n > limit:
			bad = append(bad, fmt.Sprintf("%s: %d body lines, grown past the %d long-funcs.txt allows (split it, do not grow it)", key, n, limit))
		}
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Error(b)
	}
	for key := range allowed {
		if _, ok := long[key]; !ok {
			t.Errorf("%s is no longer over %d lines: delete its line from long-funcs.txt", key, MaxBodyLines)
		}
	}
}
