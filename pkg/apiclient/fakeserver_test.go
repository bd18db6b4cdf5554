package apiclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// fakeAPIServer serves the REST paths of the two CRDs the way kube-apiserver
// does for the parts the client uses: JSON only, resourceVersion on every
// write, 404/409 as metav1.Status, status subresource for ipamclaims, JSON
// merge patch, label selectors on list and watch, watch streams that
// replay from a resourceVersion, and streaming lists (sendInitialEvents). It
// is a narrow unit-test stand-in; the real-apiserver tests live elsewhere.
type fakeAPIServer struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	rv       int
	objects  map[string]map[string]any // key: resource/namespace/name
	events   []fakeEvent
	changed  chan struct{} // closed and replaced on every event
	requests []fakeRequest
}

type fakeRequest struct {
	Method, Path, Query, ContentType, Accept string
}

type fakeEvent struct {
	rv       int
	typ      string
	resource string
	ns       string
	obj      map[string]any
}

type fakeResource struct {
	apiVersion, kind string
	status           bool
}

var fakeResources = map[string]fakeResource{
	"network-attachment-definitions": {"k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", false},
	"ipamclaims":                     {"k8s.cni.cncf.io/v1alpha1", "IPAMClaim", true},
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	t.Helper()
	f := &fakeAPIServer{t: t, objects: map[string]map[string]any{}, changed: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPIServer) config() *rest.Config {
	return &rest.Config{Host: f.srv.URL}
}

func (f *fakeAPIServer) requestLog() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

// route is a parsed request path.
type route struct {
	res         fakeResource
	resource    string
	ns, name    string
	subresource string
}

func parsePath(p string) (route, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if len(parts) < 4 || parts[0] != "apis" {
		return route{}, false
	}
	gv := parts[1] + "/" + parts[2]
	rest := parts[3:]
	var r route
	if rest[0] == "namespaces" {
		if len(rest) < 3 {
			return route{}, false
		}
		r.ns = rest[1]
		rest = rest[2:]
	}
	r.resource = rest[0]
	res, ok := fakeResources[r.resource]
	if !ok || res.apiVersion != gv {
		return route{}, false
	}
	r.res = res
	if len(rest) > 1 {
		r.name = rest[1]
	}
	if len(rest) > 2 {
		r.subresource = rest[2]
	}
	if len(rest) > 3 || (r.subresource != "" && (r.subresource != "status" || !res.status)) {
		return route{}, false
	}
	return r, true
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": "v1", "kind": "Status", "status": "Failure",
		"message": msg, "reason": reason, "code": code,
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func meta(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

func (f *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept")})
	f.mu.Unlock()

	rt, ok := parsePath(r.URL.Path)
	if !ok {
		writeStatus(w, http.StatusNotFound, "NotFound", "no such path "+r.URL.Path)
		return
	}
	if rt.ns == "fail" {
		writeStatus(w, http.StatusInternalServerError, "InternalError", "injected failure")
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	switch {
	case r.Method == http.MethodGet && rt.name == "" && r.URL.Query().Get("watch") == "true":
		f.watch(w, r, rt, sel)
	case r.Method == http.MethodGet && rt.name == "":
		f.list(w, rt, sel)
	case r.Method == http.MethodGet:
		f.mu.Lock()
		obj, ok := f.objects[rt.resource+"/"+rt.ns+"/"+rt.name]
		f.mu.Unlock()
		if !ok {
			writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", rt.resource, rt.name))
			return
		}
		writeJSON(w, http.StatusOK, obj)
	case r.Method == http.MethodPost && rt.name == "":
		f.write(w, r, rt, "create")
	case r.Method == http.MethodPut && rt.name != "":
		f.write(w, r, rt, "update")
	case r.Method == http.MethodPatch && rt.name != "":
		f.write(w, r, rt, "patch")
	case r.Method == http.MethodDelete && rt.name != "":
		f.mu.Lock()
		key := rt.resource + "/" + rt.ns + "/" + rt.name
		obj, ok := f.objects[key]
		if ok {
			delete(f.objects, key)
			f.emitLocked("DELETED", rt, deepCopyJSON(obj))
		}
		f.mu.Unlock()
		if !ok {
			writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", rt.resource, rt.name))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Success"})
	default:
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" "+r.URL.Path)
	}
}

func matches(obj map[string]any, ns string, sel labels.Selector) bool {
	m := meta(obj)
	if ns != "" && m["namespace"] != ns {
		return false
	}
	set := labels.Set{}
	if l, ok := m["labels"].(map[string]any); ok {
		for k, v := range l {
			set[k], _ = v.(string)
		}
	}
	return sel.Matches(set)
}

func (f *fakeAPIServer) list(w http.ResponseWriter, rt route, sel labels.Selector) {
	f.mu.Lock()
	items := []any{}
	for key, obj := range f.objects {
		if strings.HasPrefix(key, rt.resource+"/") && matches(obj, rt.ns, sel) {
			items = append(items, obj)
		}
	}
	rv := f.rv
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": rt.res.apiVersion, "kind": rt.res.kind + "List",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(rv)},
		"items":    items,
	})
}

func (f *fakeAPIServer) watch(w http.ResponseWriter, r *http.Request, rt route, sel labels.Selector) {
	q := r.URL.Query()
	streamList := q.Get("sendInitialEvents") == "true"
	if streamList && (q.Get("allowWatchBookmarks") != "true" || q.Get("resourceVersionMatch") != "NotOlderThan") {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "sendInitialEvents needs allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan")
		return
	}
	from := 0
	var initial []map[string]any
	if v := q.Get("resourceVersion"); v != "" && !streamList {
		from, _ = strconv.Atoi(v)
	} else {
		f.mu.Lock()
		from = f.rv
		if streamList {
			initial = f.matchingLocked(rt, sel)
		}
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	enc := json.NewEncoder(w)
	if streamList && !f.sendInitialEvents(enc, rt, initial, from) {
		return
	}
	for {
		f.mu.Lock()
		var pending []fakeEvent
		for _, e := range f.events {
			if e.rv > from && e.resource == rt.resource && matches(e.obj, rt.ns, sel) {
				pending = append(pending, e)
			}
		}
		changed := f.changed
		f.mu.Unlock()
		for _, e := range pending {
			if err := enc.Encode(map[string]any{"type": e.typ, "object": e.obj}); err != nil {
				return
			}
			from = e.rv
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
	}
}

// matchingLocked returns copies of the objects of rt's resource and
// namespace that sel matches, in key order; f.mu is held.
func (f *fakeAPIServer) matchingLocked(rt route, sel labels.Selector) []map[string]any {
	var out []map[string]any
	for _, key := range slices.Sorted(maps.Keys(f.objects)) {
		if obj := f.objects[key]; strings.HasPrefix(key, rt.resource+"/") && matches(obj, rt.ns, sel) {
			out = append(out, deepCopyJSON(obj))
		}
	}
	return out
}

// sendInitialEvents writes a streaming list's start as kube-apiserver does:
// an ADDED event per object, then a BOOKMARK at rv annotated
// k8s.io/initial-events-end. It reports whether the client is still there.
func (f *fakeAPIServer) sendInitialEvents(enc *json.Encoder, rt route, objs []map[string]any, rv int) bool {
	for _, obj := range objs {
		if err := enc.Encode(map[string]any{"type": "ADDED", "object": obj}); err != nil {
			return false
		}
	}
	bookmark := map[string]any{"apiVersion": rt.res.apiVersion, "kind": rt.res.kind, "metadata": map[string]any{
		"resourceVersion": strconv.Itoa(rv),
		"annotations":     map[string]any{"k8s.io/initial-events-end": "true"},
	}}
	return enc.Encode(map[string]any{"type": "BOOKMARK", "object": bookmark}) == nil
}

// emitLocked records an event; f.mu is held.
func (f *fakeAPIServer) emitLocked(typ string, rt route, obj map[string]any) {
	f.rv++
	meta(obj)["resourceVersion"] = strconv.Itoa(f.rv)
	f.events = append(f.events, fakeEvent{rv: f.rv, typ: typ, resource: rt.resource, ns: rt.ns, obj: obj})
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeAPIServer) write(w http.ResponseWriter, r *http.Request, rt route, op string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	wantCT := "application/json"
	if op == "patch" {
		wantCT = "application/merge-patch+json"
	}
	if ct := r.Header.Get("Content-Type"); ct != wantCT {
		writeStatus(w, http.StatusUnsupportedMediaType, "UnsupportedMediaType", "content type "+ct)
		return
	}
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "body: "+err.Error())
		return
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	name := rt.name
	if op == "create" {
		name, _ = meta(in)["name"].(string)
		if name == "" {
			writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "metadata.name: Required value")
			return
		}
	}
	key := rt.resource + "/" + rt.ns + "/" + name
	old, exists := f.objects[key]
	switch {
	case op == "create" && exists:
		writeStatus(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("%s %q already exists", rt.resource, name))
		return
	case op != "create" && !exists:
		writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", rt.resource, name))
		return
	}
	var obj map[string]any
	switch op {
	case "create":
		if in["apiVersion"] != rt.res.apiVersion || in["kind"] != rt.res.kind {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("apiVersion/kind %v/%v", in["apiVersion"], in["kind"]))
			return
		}
		obj = in
		m := meta(obj)
		m["namespace"] = rt.ns
		m["uid"] = fmt.Sprintf("uid-%d", f.rv+1)
		if rt.res.status {
			delete(obj, "status") // the status subresource ignores status on create
		}
	case "update":
		if rv, _ := meta(in)["resourceVersion"].(string); rv != "" && rv != meta(old)["resourceVersion"] {
			writeStatus(w, http.StatusConflict, "Conflict", fmt.Sprintf("%s %q: the object has been modified", rt.resource, name))
			return
		}
		switch {
		case rt.subresource == "status":
			obj = deepCopyJSON(old)
			obj["status"] = in["status"]
		case rt.res.status:
			obj = in
			if s, ok := old["status"]; ok {
				obj["status"] = s
			} else {
				delete(obj, "status")
			}
		default:
			obj = in
		}
		meta(obj)["namespace"] = rt.ns
		meta(obj)["uid"] = meta(old)["uid"]
	case "patch":
		obj = mergePatch(deepCopyJSON(old), in).(map[string]any)
	}
	f.objects[key] = obj
	typ := "MODIFIED"
	code := http.StatusOK
	if op == "create" {
		typ, code = "ADDED", http.StatusCreated
	}
	f.emitLocked(typ, rt, obj)
	writeJSON(w, code, obj)
}

// mergePatch applies an RFC 7386 JSON merge patch.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

func deepCopyJSON(m map[string]any) map[string]any {
	data, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

// testContext is a context with a deadline for one test.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
