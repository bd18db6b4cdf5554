package archtest

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const (
	module = "github.com/multinet/multinet"
	// engine is the CNI engine's package.
	engine = module + "/internal/node/attach"
	// server and wire are the shim⇄daemon server and its wire types: the
	// engine's edge, which decodes requests for it.
	server = module + "/internal/node/cniserver"
	wire   = module + "/internal/node/cniserver/api"
	// publisher is the network-status publisher, a package of its own the
	// engine reaches through attach.StatusPublisher.
	publisher = module + "/internal/node/netstatus"
	// hotplug changes running sandboxes' attachments, a client of the
	// engine through hotplug.Engine (attach.HotPlugPort).
	hotplug = module + "/internal/node/hotplug"
)

// load type-checks the packages of patterns (their non-test files, as the
// binaries build them).
func load(t *testing.T, patterns ...string) map[string]*packages.Package {
	t.Helper()
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedImports | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax,
		Dir:  "../../..",
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatalf("loading %v: %v", patterns, err)
	}
	out := map[string]*packages.Package{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		out[p.PkgPath] = p
	}
	return out
}

// TestEngineDoesNotSeeTheWireType: the engine neither imports the CNI
// server nor its wire package, and no function, method, field or
// interface method of the engine's package has a type that mentions a wire
// type (the request is decoded once, at the server's edge, into a
// cnirequest.Request).
func TestEngineDoesNotSeeTheWireType(t *testing.T) {
	p := load(t, engine)[engine]
	if p == nil {
		t.Fatalf("package %s not loaded", engine)
	}
	for path := range p.Imports {
		if path == server || strings.HasPrefix(path, server+"/") {
			t.Errorf("%s imports %s: the engine takes decoded requests (internal/node/cnirequest) and knows nothing of the server", engine, path)
		}
	}
	for _, name := range p.Types.Scope().Names() {
		obj := p.Types.Scope().Lookup(name)
		checkObj(t, p.Fset, obj)
		if tn, ok := obj.(*types.TypeName); ok {
			if n, ok := tn.Type().(*types.Named); ok {
				for m := range n.Methods() {
					checkObj(t, p.Fset, m)
				}
			}
		}
	}
}

// checkObj reports obj when its type mentions a wire type.
func checkObj(t *testing.T, fset *token.FileSet, obj types.Object) {
	t.Helper()
	typ := obj.Type()
	if tn, ok := obj.(*types.TypeName); ok {
		typ = tn.Type().Underlying()
	}
	if w := mentions(typ, wire, map[types.Type]bool{}); w != "" {
		t.Errorf("%s: %s has type %s, which mentions the wire type %s", fset.Position(obj.Pos()), obj.Name(), obj.Type(), w)
	}
}

// mentions returns the first named type of package pkg that typ is or is
// made of, "" when none. Named types of other packages are not entered.
func mentions(typ types.Type, pkg string, seen map[types.Type]bool) string {
	if seen[typ] {
		return ""
	}
	seen[typ] = true
	switch t := typ.(type) {
	case *types.Named:
		if o := t.Obj(); o.Pkg() != nil && o.Pkg().Path() == pkg {
			return o.Pkg().Name() + "." + o.Name()
		}
		for a := range t.TypeArgs().Types() {
			if w := mentions(a, pkg, seen); w != "" {
				return w
			}
		}
		return ""
	case *types.Alias:
		return mentions(types.Unalias(t), pkg, seen)
	case *types.Pointer:
		return mentions(t.Elem(), pkg, seen)
	case *types.Slice:
		return mentions(t.Elem(), pkg, seen)
	case *types.Array:
		return mentions(t.Elem(), pkg, seen)
	case *types.Chan:
		return mentions(t.Elem(), pkg, seen)
	case *types.Map:
		if w := mentions(t.Key(), pkg, seen); w != "" {
			return w
		}
		return mentions(t.Elem(), pkg, seen)
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for v := range tup.Variables() {
				if w := mentions(v.Type(), pkg, seen); w != "" {
					return w
				}
			}
		}
	case *types.Struct:
		for f := range t.Fields() {
			if w := mentions(f.Type(), pkg, seen); w != "" {
				return w
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if w := mentions(m.Type(), pkg, seen); w != "" {
				return w
			}
		}
	}
	return ""
}

// The most methods attach.Engine may have: exported, the CNI verbs (Add,
// Del, Check, GC, Status) and the few the node agent's other components
// (hot-plug, the network-status publisher, the reaper) call through their
// narrow interfaces; in all, exported or not. It had 11 and 68 when
// hot-plug, the network-status publisher and planning lived in it.
const (
	engineExportedBound = 7
	engineMethodBound   = 48
)

// TestEngineSurfaceIsTheCNIVerbs: attach.Engine's exported methods are the
// CNI verbs and few others, and it has few methods in all.
func TestEngineSurfaceIsTheCNIVerbs(t *testing.T) {
	p := load(t, engine)[engine]
	obj := p.Types.Scope().Lookup("Engine")
	if obj == nil {
		t.Fatalf("%s.Engine not found", engine)
	}
	ms := types.NewMethodSet(types.NewPointer(obj.Type()))
	var exported []string
	for m := range ms.Methods() {
		if m.Obj().Exported() {
			exported = append(exported, m.Obj().Name())
		}
	}
	for _, verb := range []string{"Add", "Del", "Check", "GC", "Status"} {
		if !slices.Contains(exported, verb) {
			t.Errorf("attach.Engine has no method %s (a CNI verb)", verb)
		}
	}
	t.Logf("attach.Engine: %d methods, %d exported: %s", ms.Len(), len(exported), strings.Join(exported, " "))
	if len(exported) > engineExportedBound {
		t.Errorf("attach.Engine has %d exported methods, want at most %d: its surface is the CNI verbs; hot-plug, network-status and the reaper are clients behind narrow interfaces (%s)",
			len(exported), engineExportedBound, strings.Join(exported, " "))
	}
	if ms.Len() > engineMethodBound {
		t.Errorf("attach.Engine has %d methods, want at most %d: one job (run the CNI verbs); planning, hot-plug and network-status are packages of their own", ms.Len(), engineMethodBound)
	}
}

// TestNetworkStatusIsItsOwnPackage: the network-status publisher is a
// package of its own; neither it nor the engine imports the other (the
// engine publishes through attach.StatusPublisher, the publisher shares
// the engine's per-container locks, internal/node/keyedmutex).
func TestNetworkStatusIsItsOwnPackage(t *testing.T) {
	pkgs := load(t, engine, publisher)
	for from, to := range map[string]string{engine: publisher, publisher: engine} {
		p := pkgs[from]
		if p == nil {
			t.Fatalf("package %s not loaded", from)
		}
		if _, ok := p.Imports[to]; ok {
			t.Errorf("%s imports %s", from, to)
		}
	}
	e := pkgs[engine].Types.Scope().Lookup("Engine")
	for _, m := range []string{"RunStatusRetries", "PendingStatus", "StatusPodGone", "Wait"} {
		if obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(e.Type()), false, nil, m); obj != nil {
			t.Errorf("attach.Engine has %s: network-status is netstatus.Publisher's", m)
		}
	}
}

// planningFuncs are the functions that decide attachments: the pod's
// network selection checked and planned (podnetworks.Check), interface
// names, config lists turned into attachments (netconf).
var planningFuncs = map[string][]string{
	module + "/pkg/spec/podnetworks": {"Check"},
	module + "/pkg/spec/netconf":     {"Plan", "PlanAttachment", "IfNames", "DefaultAttachment"},
}

// TestPlanningInOnePlace: in the engine, only the planner (attach's
// planner type) calls the planning functions; ADD, DEL's fallback, the
// salvage of a corrupt record and hot-plug all plan through it.
func TestPlanningInOnePlace(t *testing.T) {
	p := load(t, engine)[engine]
	calls := 0
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				fn, ok := p.TypesInfo.Uses[sel.Sel].(*types.Func)
				if !ok || fn.Pkg() == nil || !slices.Contains(planningFuncs[fn.Pkg().Path()], fn.Name()) {
					return true
				}
				calls++
				if recv := receiver(fd); recv != "planner" {
					t.Errorf("%s: %s calls %s.%s: planning is the planner's (internal/node/attach plan.go)", p.Fset.Position(call.Pos()), funcName(fd), fn.Pkg().Name(), fn.Name())
				}
				return true
			})
		}
	}
	if calls == 0 {
		t.Errorf("no call of a planning function found in %s: the test no longer sees what it checks", engine)
	}
}

// receiver is the type name of fd's receiver, "" for a function.
func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func funcName(fd *ast.FuncDecl) string {
	if r := receiver(fd); r != "" {
		return r + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// TestHotPlugIsAClientOfTheEngine: hot-plug is a package of its own that
// reaches the engine only through its narrow hotplug.Engine interface,
// which attach.HotPlugPort implements; neither package imports the other
// and attach.Engine has no hot-plug method of its own.
func TestHotPlugIsAClientOfTheEngine(t *testing.T) {
	pkgs := load(t, engine, hotplug)
	for from, to := range map[string]string{engine: hotplug, hotplug: engine} {
		p := pkgs[from]
		if p == nil {
			t.Fatalf("package %s not loaded", from)
		}
		if _, ok := p.Imports[to]; ok {
			t.Errorf("%s imports %s", from, to)
		}
	}
	e := pkgs[engine].Types.Scope().Lookup("Engine")
	if obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(e.Type()), false, nil, "HotPlug"); obj != nil {
		t.Error("attach.Engine has HotPlug: hot-plug is hotplug.HotPlugger's")
	}
	iface := pkgs[hotplug].Types.Scope().Lookup("Engine")
	port := pkgs[engine].Types.Scope().Lookup("HotPlugPort")
	if iface == nil || port == nil {
		t.Fatal("hotplug.Engine or attach.HotPlugPort not found")
	}
	it, ok := iface.Type().Underlying().(*types.Interface)
	if !ok {
		t.Fatal("hotplug.Engine is not an interface")
	}
	// The two packages were type-checked apart: compare method names and
	// signatures as strings.
	ms := types.NewMethodSet(types.NewPointer(port.Type()))
	for m := range it.Methods() {
		sel := ms.Lookup(m.Pkg(), m.Name())
		if sel == nil {
			t.Errorf("attach.HotPlugPort has no method %s of hotplug.Engine", m.Name())
			continue
		}
		if got, want := sigTypes(sel.Type()), sigTypes(m.Type()); got != want {
			t.Errorf("attach.HotPlugPort.%s is %s, hotplug.Engine wants %s", m.Name(), got, want)
		}
	}
	if n := it.NumMethods(); n > hotPlugPortBound {
		t.Errorf("hotplug.Engine has %d methods, want at most %d: keep hot-plug's view of the engine narrow", n, hotPlugPortBound)
	}
}

// hotPlugPortBound is the most methods hotplug.Engine may have.
const hotPlugPortBound = 8

// sigTypes is a signature's parameter and result types, without names.
func sigTypes(t types.Type) string {
	sig, ok := t.(*types.Signature)
	if !ok {
		return types.TypeString(t, nil)
	}
	var b strings.Builder
	for _, tup := range []*types.Tuple{sig.Params(), sig.Results()} {
		b.WriteString("(")
		for v := range tup.Variables() {
			b.WriteString(types.TypeString(v.Type(), nil) + ",")
		}
		b.WriteString(")")
	}
	return b.String()
}
