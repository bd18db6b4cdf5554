package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memcg is one memory cgroup (cgroup v1 memory controller, or v2) whose
// limit the bench lowers for a burst and restores afterwards.
type memcg struct {
	dir string
	v1  bool
	// savedLimit is the limit file's content before setLimit, written back
	// by restore.
	savedLimit string
	// peakFile (v2): memory.peak held open after its reset, whose reads
	// then give the peak since the reset (Linux ≥ 6.12).
	peakFile *os.File
}

// memcgOf finds pid's memory cgroup: the v1 memory hierarchy's when the
// memory controller is mounted there, else the v2 unified one. For a
// deployed multinetd, its container's cgroup.
func memcgOf(pid int) (*memcg, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	return memcgFrom(string(b), "/sys/fs/cgroup")
}

// memcgFrom picks the memory cgroup from the content of /proc/<pid>/cgroup
// under the cgroup mount root.
func memcgFrom(procCgroup, root string) (*memcg, error) {
	lines := strings.Split(procCgroup, "\n")
	for _, line := range lines {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[1] == "memory" {
			return &memcg{dir: filepath.Join(root, "memory", parts[2]), v1: true}, nil
		}
	}
	for _, line := range lines {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			for _, r := range []string{filepath.Join(root, "unified"), root} {
				if _, err := os.Stat(filepath.Join(r, p, "memory.max")); err == nil {
					return &memcg{dir: filepath.Join(r, p)}, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no memory cgroup in %q", procCgroup)
}

func (m *memcg) file(v1, v2 string) string {
	if m.v1 {
		return filepath.Join(m.dir, v1)
	}
	return filepath.Join(m.dir, v2)
}

// setLimit sets the memory limit (bytes), saving the current one for
// restore.
func (m *memcg) setLimit(bytes int64) error {
	f := m.file("memory.limit_in_bytes", "memory.max")
	old, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	m.savedLimit = strings.TrimSpace(string(old))
	if err := os.WriteFile(f, []byte(strconv.FormatInt(bytes, 10)), 0o644); err != nil {
		return fmt.Errorf("set %s to %d: %w", f, bytes, err)
	}
	return nil
}

// restore writes back the limit setLimit replaced.
func (m *memcg) restore() error {
	if m.peakFile != nil {
		_ = m.peakFile.Close()
		m.peakFile = nil
	}
	if m.savedLimit == "" {
		return nil
	}
	f := m.file("memory.limit_in_bytes", "memory.max")
	if err := os.WriteFile(f, []byte(m.savedLimit), 0o644); err != nil {
		return fmt.Errorf("restore %s to %s: %w", f, m.savedLimit, err)
	}
	m.savedLimit = ""
	return nil
}

// limit reads the current limit (bytes; 0: none).
func (m *memcg) limit() (int64, error) {
	n, err := readCgroupInt(m.file("memory.limit_in_bytes", "memory.max"))
	if n >= 1<<62 { // v1's "no limit"
		n = 0
	}
	return n, err
}

// resetPeak starts a new peak measure: v1 memory.max_usage_in_bytes is
// reset by writing 0; v2 memory.peak by writing to it, the peak since then
// being what reads on that open file give. sinceReset is false when the
// kernel does not reset it (the peak is then the cgroup's since its start).
func (m *memcg) resetPeak() (sinceReset bool, err error) {
	if m.v1 {
		f := filepath.Join(m.dir, "memory.max_usage_in_bytes")
		if err := os.WriteFile(f, []byte("0"), 0o644); err != nil {
			return false, fmt.Errorf("reset %s: %w", f, err)
		}
		return true, nil
	}
	f, err := os.OpenFile(filepath.Join(m.dir, "memory.peak"), os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	if _, err := f.WriteString("reset\n"); err != nil {
		_ = f.Close()
		return false, nil
	}
	m.peakFile = f
	return true, nil
}

// peak reads the memory peak (bytes) since resetPeak (or the cgroup's
// start).
func (m *memcg) peak() (int64, error) {
	if m.peakFile != nil {
		buf := make([]byte, 64)
		n, err := m.peakFile.ReadAt(buf, 0)
		if n == 0 && err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	}
	return readCgroupInt(m.file("memory.max_usage_in_bytes", "memory.peak"))
}

// oomKills reads how many processes the kernel's OOM killer killed in the
// cgroup: oom_kill of v1 memory.oom_control or v2 memory.events.
func (m *memcg) oomKills() (int64, error) {
	b, err := os.ReadFile(m.file("memory.oom_control", "memory.events"))
	if err != nil {
		return 0, err
	}
	return parseOOMKill(string(b))
}

// parseOOMKill returns the oom_kill count of a memory.oom_control (v1) or
// memory.events (v2) file: lines "<key> <value>".
func parseOOMKill(s string) (int64, error) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "oom_kill" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no oom_kill line in %q", s)
}

func readCgroupInt(p string) (int64, error) {
	v, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(v))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// limitResult is one concurrency level's bursts run with multinetd's
// memory cgroup limited (-limit-concurrency, -memory-limit).
type limitResult struct {
	n          int   // concurrent ADDs per burst
	limit      int64 // the limit set (bytes)
	bursts     int   // multinet bursts run under it
	adds       int   // ADDs started
	failed     int   // ADDs that failed
	peak       int64 // memory peak of the cgroup over the bursts (bytes)
	sinceReset bool  // peak since the limit was set (else since the container started)
	oomKills   int64 // OOM kills in the cgroup during the bursts
	exited     bool  // multinetd's process was gone after the bursts
	err        string
}

// ok: every ADD completed, no OOM kill, multinetd still running.
func (l *limitResult) ok() bool {
	return l.err == "" && l.failed == 0 && l.oomKills == 0 && !l.exited && l.adds > 0
}

// String is the table cell.
func (l *limitResult) String() string {
	peak := mib(l.peak)
	if !l.sinceReset {
		peak += " (since the container started)"
	}
	s := fmt.Sprintf("%d of %d ADDs completed (%d bursts of %d), %d failed; memory peak %s; oom_kill %d",
		l.adds-l.failed, l.adds, l.bursts, l.n, l.failed, peak, l.oomKills)
	if l.exited {
		s += "; multinetd's process was gone afterwards"
	}
	if l.err != "" {
		s += "; " + l.err
	}
	if !l.ok() {
		s = "**FAILED**: " + s
	}
	return s
}
