package nodeexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LauncherArg is the argument that turns a binary that calls
// MaybeServeLauncher (multinetd) into the launcher process.
const LauncherArg = "--nodeexec-launcher"

// LauncherBinary is the file name of the small launcher command
// (cmd/multinet-delegate-launcher) LauncherCommand looks for next to the
// daemon's binary.
const LauncherBinary = "multinet-delegate-launcher"

// LauncherCommand returns the program to run as the launcher for the daemon
// binary self: LauncherBinary in self's directory when it is an executable
// regular file there (the images and hack/ builds put it there), else self,
// which serves as the launcher through MaybeServeLauncher. The small binary
// keeps the long-lived launcher's memory to its own.
func LauncherCommand(self string) string {
	p := filepath.Join(filepath.Dir(self), LauncherBinary)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return p
	}
	return self
}

// maxRequest bounds one launch request (path, environment, root) in bytes.
const maxRequest = 256 << 10

// launchFDs is the number of descriptors passed with a launch request: the
// call socket, the delegate's stdin, stdout and stderr, and the caller's
// read ends of stdout and stderr (for the helper to see them hang up).
const launchFDs = 6

// Launcher starts delegates from a helper process placed once in the node
// cgroup, so that they are born there: a fork inherits its parent's cgroup
// for free, while moving every delegate after its start costs a cgroup
// migration, which on cgroup v1 waits for an RCU grace period (2.6 ms
// measured here per move, more on a busy node; docs/bench.md).
//
// The helper is the program LauncherCommand picks (multinet-delegate-launcher,
// or the daemon's own binary) run with LauncherArg. It receives
// one request per delegate over a SOCK_SEQPACKET socket pair (the path, the
// environment, the root to chroot into, the delegate's stdin, stdout and
// stderr, and the caller's read ends of stdout and stderr, as file
// descriptors), starts the delegate in a process group of its own, and
// answers on a per-call socket with its exit status. Closing that socket
// (the caller's context ended) kills the delegate's process group; so does
// the delegate's exit while a process it left still holds its stdout or
// stderr (waitDelegate). When the helper dies, the next call starts a new
// one. Safe for concurrent use.
type Launcher struct {
	argv   []string
	cgroup *Cgroup

	mu     sync.Mutex
	ctrl   *net.UnixConn
	proc   *exec.Cmd
	exited chan struct{} // closed when proc has exited
}

// NewLauncher returns a Launcher that runs argv[0] with argv[1:] and
// LauncherArg as the helper, placed in cg. The helper starts on first use.
// Errors: empty argv or nil cg.
func NewLauncher(argv []string, cg *Cgroup) (*Launcher, error) {
	if len(argv) == 0 || cg == nil {
		return nil, errors.New("nodeexec: a launcher needs a command and a cgroup")
	}
	return &Launcher{argv: argv, cgroup: cg}, nil
}

// Start starts the helper now (to report a bad cgroup at daemon start
// instead of at the first delegate). Errors: it cannot be started or placed.
func (l *Launcher) Start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.control()
	return err
}

// control returns the live control socket, starting the helper when there
// is none. l.mu is held.
func (l *Launcher) control() (*net.UnixConn, error) {
	if l.ctrl != nil {
		return l.ctrl, nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("delegate launcher: socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "launcher-ctrl"), os.NewFile(uintptr(fds[1]), "launcher-ctrl-child")
	defer theirs.Close()
	cmd := exec.Command(l.argv[0], append(append([]string(nil), l.argv[1:]...), LauncherArg)...)
	cmd.ExtraFiles = []*os.File{theirs} // fd 3
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, fmt.Errorf("delegate launcher: start %s: %w", l.argv[0], err)
	}
	if err := l.cgroup.Place(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		mine.Close()
		return nil, fmt.Errorf("delegate launcher: %w", err)
	}
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("delegate launcher: %w", err)
	}
	l.ctrl, l.proc, l.exited = fc.(*net.UnixConn), cmd, make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(cmd, l.exited)
	return l.ctrl, nil
}

// Close stops the helper and waits up to 5 s for it to exit; delegates it
// started keep running to their end.
func (l *Launcher) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctrl == nil {
		return nil
	}
	err := l.ctrl.Close() // the helper exits on EOF
	select {
	case <-l.exited:
	case <-time.After(5 * time.Second):
		_ = l.proc.Process.Kill()
	}
	l.ctrl, l.proc = nil, nil
	return err
}

// launchRequest is one delegate to start.
type launchRequest struct {
	Path string   `json:"path"`
	Env  []string `json:"env"`
	Root string   `json:"root,omitempty"`
}

// launchResult is how it ended.
type launchResult struct {
	// Started is false when it could not be started; Error says why.
	Started bool   `json:"started"`
	Exit    int    `json:"exit"`
	Signal  string `json:"signal,omitempty"`
	Error   string `json:"error,omitempty"`
}

// send hands one request and its file descriptors (call socket, stdin,
// stdout, stderr, and the caller's read ends of stdout and stderr) to the
// helper, starting a new helper once when the old one is gone.
func (l *Launcher) send(req []byte, fds []int) error {
	oob := unix.UnixRights(fds...)
	l.mu.Lock()
	defer l.mu.Unlock()
	for attempt := 0; ; attempt++ {
		ctrl, err := l.control()
		if err != nil {
			return err
		}
		if _, _, err = ctrl.WriteMsgUnix(req, oob, nil); err == nil {
			return nil
		}
		_ = ctrl.Close()
		l.ctrl, l.proc = nil, nil
		if attempt == 1 {
			return fmt.Errorf("delegate launcher: %w", err)
		}
	}
}

// run starts path through the helper with stdin, and returns its stdout,
// stderr and how it ended. When ctx ends first, the helper kills the
// delegate's process group and run returns ctx's error at once; after the
// delegate's answer, stdout and stderr are read until EOF, for at most
// pipeGrace (the helper killed the group of a delegate that left a process
// holding them; one of another group may still hold them).
func (l *Launcher) run(ctx context.Context, root, path string, stdin []byte, env []string) (stdout, stderr []byte, res launchResult, err error) {
	req, err := json.Marshal(launchRequest{Path: path, Env: env, Root: root})
	if err != nil {
		return nil, nil, res, fmt.Errorf("plugin %s: launch request: %w", path, err)
	}
	if len(req) > maxRequest {
		return nil, nil, res, fmt.Errorf("plugin %s: launch request of %d bytes, more than %d", path, len(req), maxRequest)
	}
	call, theirCall, err := socketPair()
	if err != nil {
		return nil, nil, res, err
	}
	defer call.Close()
	dio, err := newDelegateIO()
	if err != nil {
		theirCall.Close()
		return nil, nil, res, fmt.Errorf("plugin %s: %w", path, err)
	}
	// Fd also makes the delegate's ends blocking, as a delegate's stdio must
	// be. Our read ends stay pollable (rawFD), so that finish can close them
	// under a pending read; the helper only polls its copies for hang-up.
	fds := []int{int(theirCall.Fd()), int(dio.Child[0].Fd()), int(dio.Child[1].Fd()), int(dio.Child[2].Fd()), rawFD(dio.outR), rawFD(dio.errR)}
	err = l.send(req, fds)
	theirCall.Close()
	dio.closeChild()
	if err != nil {
		dio.finish(0, nil)
		return nil, nil, res, fmt.Errorf("plugin %s: %w", path, err)
	}
	dio.start(stdin)

	stop := context.AfterFunc(ctx, func() { _ = call.Close() }) // the helper kills the delegate's group
	derr := json.NewDecoder(call).Decode(&res)
	stop()
	if derr != nil {
		outBuf, errBuf := dio.finish(0, nil)
		if ctx.Err() != nil {
			return outBuf, errBuf, res, fmt.Errorf("plugin %s: %w", path, ctx.Err())
		}
		return outBuf, errBuf, res, fmt.Errorf("plugin %s: delegate launcher gave no result: %w", path, derr)
	}
	outBuf, errBuf := dio.finish(pipeGrace, ctx.Done())
	return outBuf, errBuf, res, nil
}

// rawFD is f's descriptor, without the switch to blocking mode of f.Fd().
// It stays valid while f is open.
func rawFD(f *os.File) int {
	fd := -1
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}

func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	// Ours non-blocking: os.NewFile makes it pollable, so that Close
	// interrupts a pending read (the caller's context ended).
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "call"), os.NewFile(uintptr(fds[1]), "call-child"), nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// MaybeServeLauncher turns the process into the launcher helper when its
// last argument is LauncherArg: it serves the control socket on fd 3 until
// the daemon closes it, then exits. Otherwise it returns at once. Call it
// first thing in main.
func MaybeServeLauncher() {
	if len(os.Args) < 2 || os.Args[len(os.Args)-1] != LauncherArg {
		return
	}
	if err := serveLauncher(os.NewFile(3, "launcher-ctrl")); err != nil {
		fmt.Fprintln(os.Stderr, "delegate launcher:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveLauncher reads launch requests from ctrl until EOF.
func serveLauncher(ctrl *os.File) error {
	fc, err := net.FileConn(ctrl)
	ctrl.Close()
	if err != nil {
		return err
	}
	conn := fc.(*net.UnixConn)
	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(launchFDs*4))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			if err == nil || errors.Is(err, io.EOF) || n == 0 {
				return nil
			}
			return err
		}
		files, err := receivedFiles(oob[:oobn])
		if err != nil {
			fmt.Fprintln(os.Stderr, "delegate launcher:", err)
			continue
		}
		var req launchRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil || len(files) != launchFDs {
			fmt.Fprintln(os.Stderr, "delegate launcher: bad request")
			closeAll(files...)
			continue
		}
		go launch(req, files)
	}
}

func receivedFiles(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, err
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			if len(files) == 0 {
				// The call socket: pollable, so that a read sees the
				// caller's close while the delegate runs. The delegate's
				// stdio stay blocking, as a runtime gives them.
				_ = unix.SetNonblock(fd, true)
			}
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return files, nil
}

// launch runs one delegate: files are the call socket, stdin, stdout,
// stderr, and the caller's read ends of stdout and stderr (polled, never
// read: the caller reads them).
func launch(req launchRequest, files []*os.File) {
	call, pipes := files[0], files[4:]
	defer call.Close()
	defer closeAll(pipes...)
	cmd := inRoot(exec.Command(req.Path), req.Env, req.Root)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[1], files[2], files[3]
	err := cmd.Start()
	closeAll(files[1:4]...)
	enc := json.NewEncoder(call)
	if err != nil {
		_ = enc.Encode(launchResult{Error: err.Error()})
		return
	}
	// The caller closes the call socket when its context ends.
	stop := make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, rerr := call.Read(b[:]); rerr != nil {
				close(stop)
				return
			}
		}
	}()
	res := launchResult{Started: true}
	werr := waitDelegate(cmd, stop, func(grace time.Duration) bool { return hungUp(pipes, grace) })
	if werr != nil {
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			res.Exit = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.Signal = ws.Signal().String()
			}
		} else {
			res.Exit, res.Error = -1, werr.Error()
		}
	}
	_ = enc.Encode(res)
}

// hungUp reports whether every pipe read end of files hung up (no process
// holds a write end any more) within grace. It polls for POLLHUP only, so
// unread data does not wake it; files stay open meanwhile.
func hungUp(files []*os.File, grace time.Duration) bool {
	deadline := time.Now().Add(grace)
	var pfds []unix.PollFd
	for _, f := range files {
		pfds = append(pfds, unix.PollFd{Fd: int32(rawFD(f))})
	}
	for {
		open := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				open = append(open, unix.PollFd{Fd: p.Fd})
			}
		}
		pfds = open
		if len(pfds) == 0 {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll(pfds, int(left.Milliseconds())+1)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return false
		case n == 0 && time.Now().After(deadline):
			return false
		}
	}
}
