// Package state stores the daemon's attachment records: for each container, what
// multinetd attached and how (delegate config as run, ifname, runtimeConfig,
// result), so that CNI DEL, CHECK and GC work without the API server or the
// NetworkAttachmentDefinition: ADD writes the record before it answers.
//
// Every write is atomic: the record is written to a temporary file in the same
// directory and renamed over the old file. A reader therefore sees either the
// old or the new record, never a torn one. Save makes the record durable
// (fsync of the file and of the directory) either before it returns
// (SyncEach) or, by default, in a background group commit that batches the
// saves made meanwhile (SyncBackground, sync.go; docs/decisions/state.md
// "Group commit").
// Writers hold a shared flock on the directory while their temp file exists;
// List removes leftover temp files only under the exclusive lock, so it never
// removes another save in progress (docs/decisions/state.md).
// A file that fails to decode is reported as ErrCorrupt and never silently
// treated as "no attachments".
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/multinet/multinet/internal/process/atomicfile"
)

// RecordVersion is the on-disk format version written by this package.
// Version 2 added Record.NetworkStatus; a version 1 record loads with no
// NetworkStatus (nothing to publish). Load refuses a version above it.
const RecordVersion = 2

// maxRecordBytes bounds a record file read from disk (a pod with many networks
// and large results stays far below it).
const maxRecordBytes = 8 << 20

var (
	// ErrNotFound is returned by Load when no record exists for the container.
	ErrNotFound = errors.New("no attachment record")
	// ErrCorrupt is returned (wrapped) by Load when a record exists but cannot be decoded.
	ErrCorrupt = errors.New("corrupt attachment record")
)

// Phase says how far an attachment got.
type Phase string

const (
	// PhasePlanned: the delegate ADD was about to run (or ran and its result was
	// not recorded yet). DEL must still run the delegate's DEL.
	PhasePlanned Phase = "planned"
	// PhaseAdded: the delegate ADD succeeded and Result holds its result.
	PhaseAdded Phase = "added"
)

// Record is everything multinetd attached for one container (one pod sandbox).
type Record struct {
	// Version is RecordVersion at write time.
	Version int `json:"version"`
	// ContainerID is the runtime's CNI_CONTAINERID.
	ContainerID string `json:"containerID"`
	// Netns is the runtime's CNI_NETNS at ADD time.
	Netns string `json:"netns"`
	// PodNamespace, PodName and PodUID identify the pod (from CNI_ARGS).
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
	PodUID       string `json:"podUID,omitempty"`
	// CNIArgs is the runtime's CNI_ARGS string, passed again to every delegate on DEL.
	CNIArgs string `json:"cniArgs,omitempty"`
	// CNIPath is the runtime's CNI_PATH at ADD time, where hot-plug finds
	// the delegates (unless multinetd's cniBinDirs is set). Empty in records
	// written before hot-plug.
	CNIPath string `json:"cniPath,omitempty"`
	// Selection is true when every attachment made for a network selection
	// element of the pod carries that element (Attachment.Element), so that
	// hot-plug can tell which elements are attached. False in records
	// written before hot-plug: their sandboxes are not hot-plugged.
	Selection bool `json:"selection,omitempty"`
	// HotPlug is the hot-plug in progress: saved before its first delegate
	// runs, cleared by the save that ends it. A record that still has it
	// after a restart was interrupted; the next hot-plug first finishes the
	// detaches and rolls back the attaches it left (Attachment.Detach,
	// Attachment.HotPlugged with PhasePlanned).
	HotPlug *HotPlug `json:"hotPlug,omitempty"`
	// Attachments in ADD order; DEL runs them in reverse.
	Attachments []Attachment `json:"attachments"`
	// Complete is true once the whole ADD succeeded.
	Complete bool `json:"complete"`
	// Partial is true when the attachments were recovered from a corrupt
	// record (its readable part, libcni's cache) and the pod's selection
	// could not be read: others may exist. DEL tears these down and fails
	// until the API server answers (docs/decisions/state.md "Corrupt
	// records"). Additive in version 2.
	Partial bool `json:"partial,omitempty"`
	// NetworkStatus is the network-status annotation the ADD publishes for
	// these attachments (multi-net spec §5) and whether it reached the API
	// server; nil when there is nothing to publish (no pod, network-status
	// disabled, a failed ADD, or a version 1 record). Since version 2.
	NetworkStatus *NetworkStatus `json:"networkStatus,omitempty"`
	// Updated is the time of the last write (RFC 3339).
	Updated time.Time `json:"updated"`
}

// HotPlug is a hot-plug of a running pod's networks in progress.
type HotPlug struct {
	// Networks is the k8s.v1.cni.cncf.io/networks annotation being
	// converged to.
	Networks string `json:"networks"`
	// Started is when the hot-plug began.
	Started time.Time `json:"started"`
}

// StatusState says whether a record's network-status has been published.
type StatusState string

const (
	// StatusPending: not written yet; multinetd retries the PATCH.
	StatusPending StatusState = "pending"
	// StatusLanded: the API server accepted the PATCH.
	StatusLanded StatusState = "landed"
	// StatusWithdrawn: never to be written: the pod is gone (deleted, or
	// re-created under its name), DEL or GC began tearing the attachments
	// down, or a newer sandbox of the same pod published its own.
	StatusWithdrawn StatusState = "withdrawn"
)

// NetworkStatus is the network-status annotation of a record's attachments
// (multi-net spec §5): what is to be published, on which pod object, and
// whether it has been.
type NetworkStatus struct {
	// Value is the annotation's value exactly as PATCHed (status.Encode).
	Value string `json:"value"`
	// PodUID is the UID of the pod object the annotation goes on, the PATCH's
	// precondition. For a static pod it is the mirror pod's, which differs
	// from the runtime's Record.PodUID.
	PodUID string `json:"podUID,omitempty"`
	// State is StatusPending, StatusLanded or StatusWithdrawn.
	State StatusState `json:"state"`
}

// Pending reports whether the record has a network-status not yet written.
func (r *Record) Pending() bool {
	return r != nil && r.NetworkStatus != nil && r.NetworkStatus.State == StatusPending
}

// Attachment is one delegate invocation: one network on one interface.
type Attachment struct {
	// Network is the NetworkAttachmentDefinition key "namespace/name", or the
	// default network's name when it does not come from a NAD.
	Network string `json:"network"`
	// Default is true for the cluster-wide default network (spec §6).
	Default bool `json:"default,omitempty"`
	// Auxiliary is true for the auxiliary chain (multinetd's
	// auxiliaryChain): run for every pod, not a network of the pod.
	Auxiliary bool `json:"auxiliary,omitempty"`
	// IfName is the CNI_IFNAME the delegate ran with.
	IfName string `json:"ifName"`
	// ConfList is the delegate configuration list exactly as run (JSON, with
	// name, cniVersion and args.cni injected).
	ConfList json.RawMessage `json:"confList"`
	// CapabilityArgs is the runtimeConfig given to the delegates (libcni
	// injects each key only into plugins declaring the capability).
	CapabilityArgs map[string]any `json:"capabilityArgs,omitempty"`
	// CNIArgs are the attachment's own CNI_ARGS pairs, after the runtime's
	// (MAC=, IP= of keys handed over under undeclaredCapabilities: multus),
	// given again to DEL and CHECK.
	CNIArgs [][2]string `json:"cniArgs,omitempty"`
	// Phase says whether the delegate ADD is known to have succeeded.
	Phase Phase `json:"phase"`
	// Result is the delegate's CNI result (JSON) when Phase is PhaseAdded.
	Result json.RawMessage `json:"result,omitempty"`
	// DeviceInfoFile is the CNI device-info file created for this attachment
	// (device-info spec §4.2), removed on DEL. Empty when none.
	DeviceInfoFile string `json:"deviceInfoFile,omitempty"`
	// DeviceID is the device allocated by kubelet for this attachment, if any.
	DeviceID string `json:"deviceID,omitempty"`
	// Claim is the DRA device of this attachment (its NAD names a
	// ResourceClaimTemplate), whose status in the ResourceClaim DEL clears;
	// nil when the device, if any, came from a device plugin.
	Claim *ClaimDevice `json:"claim,omitempty"`
	// Element is the network selection element (multi-net spec §4.1.2.1)
	// this attachment was made for, as canonical JSON
	// (selection.Element.MarshalJSON); nil for the default network,
	// multinetd's defaultNetworks and the auxiliary chain, which hot-plug
	// never touches.
	Element json.RawMessage `json:"element,omitempty"`
	// HotPlugged is true for an attachment made by a hot-plug rather than
	// the runtime's ADD. With PhasePlanned it is an attach a hot-plug had
	// begun and not finished.
	HotPlugged bool `json:"hotPlugged,omitempty"`
	// Detach is true for an attachment a hot-plug is removing (its element
	// left the annotation) whose delegate DEL has not succeeded yet.
	Detach bool `json:"detach,omitempty"`
}

// Store keeps one record file per container in a directory. It is safe for
// concurrent use (by different containers: the caller serializes the
// operations of one container).
type Store struct {
	dir  string
	opts Options
	sync syncer
}

// NewStore opens (creating with mode 0700 when missing) the record directory
// dir with the default Options (SyncBackground).
// Errors: the directory cannot be created.
func NewStore(dir string) (*Store, error) { return OpenStore(dir, Options{}) }

// OpenStore is NewStore with options o.
// Errors: the directory cannot be created.
func OpenStore(dir string, o Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %q: %w", dir, err)
	}
	return &Store{dir: dir, opts: o}, nil
}

// Dir returns the record directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(containerID string) (string, error) {
	if err := validContainerID(containerID); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, containerID+".json"), nil
}

// validContainerID rejects IDs that could escape the directory or collide with
// temporary files.
func validContainerID(id string) error {
	if id == "" {
		return errors.New("containerID is empty")
	}
	if len(id) > 200 {
		return fmt.Errorf("containerID %.20q... is longer than 200 bytes", id)
	}
	if strings.ContainsAny(id, "/\\\x00") || id == "." || id == ".." || strings.HasPrefix(id, ".") {
		return fmt.Errorf("containerID %q contains a path separator, NUL or leading dot", id)
	}
	return nil
}

// Save writes r atomically (temp file, rename), stamping Version and
// Updated, and makes it durable (fsync of the file and the directory): with
// SyncEach before it returns; with SyncBackground (the default) within one
// group commit of the background syncer, which starts at once and batches
// every save made meanwhile (sync.go). Either way the record is complete
// and readable, also by a restarted daemon, when Save returns; only a power
// loss before the group commit can lose it. Errors: invalid ContainerID,
// any I/O error of the write (a failed background fsync is reported to
// Options.OnSync).
func (s *Store) Save(r *Record) error {
	if s.opts.Sync == SyncEach {
		return s.save(r, true)
	}
	if err := s.save(r, false); err != nil {
		return err
	}
	s.sync.mark(s, r.ContainerID)
	return nil
}

// SaveBuffered writes r like Save (temp file and rename: a reader never sees
// a partial record) but never fsyncs it: neither before it returns nor in
// the background. The record survives a crash or restart of the daemon (the
// kernel's page cache holds it), not a power loss. ADD uses it for the plan
// written before the delegates run, which the final Save replaces
// milliseconds later (docs/decisions/attach.md). Errors: as Save.
func (s *Store) SaveBuffered(r *Record) error { return s.save(r, false) }

func (s *Store) save(r *Record, durable bool) error {
	p, err := s.path(r.ContainerID)
	if err != nil {
		return fmt.Errorf("save record: %w", err)
	}
	r.Version = RecordVersion
	r.Updated = time.Now().UTC().Truncate(time.Millisecond)
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("save record %s: encode: %w", r.ContainerID, err)
	}
	return writeAtomic(s.dir, p, data, durable)
}

// writeAtomic writes data to path (mode 0600) with atomicfile; durable also
// fsyncs the file before the rename and dir after it. It holds a shared
// writer lock on dir from before the temp file (named tmpPrefix+base+"-"...)
// is created until after the rename, so that List never removes the temp
// file of a write in progress (see removeStaleTemps).
func writeAtomic(dir, path string, data []byte, durable bool) error {
	d, err := lockDir(dir, unix.LOCK_SH)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer d.Close() // releases the writer lock
	opts := []atomicfile.Option{atomicfile.TempPrefix(tmpPrefix + filepath.Base(path) + "-")}
	if !durable {
		opts = append(opts, atomicfile.NoSync())
	}
	return atomicfile.WriteFile(path, data, 0o600, opts...)
}

// tmpPrefix starts the name of every temporary file of a write in progress
// (valid container IDs cannot start with a dot).
const tmpPrefix = ".tmp-"

// lockDir opens dir and takes an flock(2) on it: LOCK_SH for a writer (many
// at once), LOCK_EX|LOCK_NB for the cleaner of stale temporary files. flock
// locks belong to the open file description, so they exclude each other
// between goroutines of one process as between processes (an old and a new
// multinetd during an upgrade), and the kernel releases them when the holder
// dies. Closing the returned file releases the lock.
func lockDir(dir string, how int) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open dir %s: %w", dir, err)
	}
	for {
		err = unix.Flock(int(d.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("lock dir %s: %w", dir, err)
	}
	return d, nil
}

// removeStaleTemps removes the temporary files named in names, left by writes
// that were interrupted (the daemon died between create and rename). It never
// removes the temp file of a write in progress: it removes only while it holds
// the directory's lock exclusively, which it gets only when no writer (in any
// process) holds its shared lock; a writer holds that lock from before it
// creates its temp file until after it renamed or removed it. When a write is
// in progress it removes nothing; a later List will.
func (s *Store) removeStaleTemps(names []string) {
	d, err := lockDir(s.dir, unix.LOCK_EX|unix.LOCK_NB)
	if err != nil {
		return // a write is in progress (EWOULDBLOCK), or the dir is unusable
	}
	defer d.Close()
	for _, name := range names {
		os.Remove(filepath.Join(s.dir, name))
	}
}

// Load reads the record of containerID. Errors: ErrNotFound when there is none;
// an error wrapping ErrCorrupt when the file exists but does not decode (the
// caller should report it and fall back to what else it knows); I/O errors.
func (s *Store) Load(containerID string) (*Record, error) {
	p, err := s.path(containerID)
	if err != nil {
		return nil, fmt.Errorf("load record: %w", err)
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("container %s: %w", containerID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load record %s: %w", containerID, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load record %s: %w", containerID, err)
	}
	if st.Size() > maxRecordBytes {
		return nil, fmt.Errorf("record %s is %d bytes, above the %d byte limit: %w", p, st.Size(), maxRecordBytes, ErrCorrupt)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("load record %s: %w", containerID, err)
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("record %s: %v: %w", p, err, ErrCorrupt)
	}
	if r.ContainerID != containerID {
		return nil, fmt.Errorf("record %s names container %q: %w", p, r.ContainerID, ErrCorrupt)
	}
	if r.Version > RecordVersion {
		return nil, fmt.Errorf("record %s has version %d, newer than %d: %w", p, r.Version, RecordVersion, ErrCorrupt)
	}
	return &r, nil
}

// Delete removes the record of containerID; a missing record is not an error.
func (s *Store) Delete(containerID string) error {
	p, err := s.path(containerID)
	if err != nil {
		return fmt.Errorf("delete record: %w", err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete record %s: %w", containerID, err)
	}
	return nil
}

// Modified returns the time the record of containerID was last written (its
// file's modification time), also for a record that does not decode.
// Errors: ErrNotFound (wrapped) when there is no record.
func (s *Store) Modified(containerID string) (time.Time, error) {
	p, err := s.path(containerID)
	if err != nil {
		return time.Time{}, fmt.Errorf("stat record: %w", err)
	}
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, fmt.Errorf("container %s: %w", containerID, ErrNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("stat record %s: %w", containerID, err)
	}
	return st.ModTime(), nil
}

// List returns the container IDs that have a record, in directory order.
// Leftover temporary files of interrupted writes are removed when no write is
// in progress (removeStaleTemps); the temp file of a save in progress, in this
// process or another, is never removed.
func (s *Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list records in %s: %w", s.dir, err)
	}
	ids := make([]string, 0, len(entries))
	var temps []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			temps = append(temps, name)
			continue
		}
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		ids = append(ids, strings.TrimSuffix(name, ".json"))
	}
	if len(temps) > 0 {
		s.removeStaleTemps(temps)
	}
	return ids, nil
}

// ClaimDevice names a device allocated in a ResourceClaim (docs/dra.md).
type ClaimDevice struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Driver    string `json:"driver"`
	Pool      string `json:"pool"`
	Device    string `json:"device"`
}
