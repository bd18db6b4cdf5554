package nodeexec

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A delegate runs as the leader of a process group of its own (inRoot), so
// that what it forks can be killed with it; docs/decisions/nodeexec.md.
//
// pipeGrace is how long the delegate's stdout and stderr may stay open after
// it exited: a process it left behind that still holds them keeps the call
// open, and after pipeGrace its process group is killed and the pipes are
// no longer read. A delegate that leaves nothing holding them costs nothing.
const pipeGrace = time.Second

// killGroup sends SIGKILL to every process of process group pgid. The
// caller makes sure that pgid still names the delegate's group: its leader
// has not been reaped (a pid that names a process group, or a zombie, is not
// given to a new process).
func killGroup(pgid int) { _ = unix.Kill(-pgid, unix.SIGKILL) }

// waitExited blocks until the child pid has exited, without reaping it.
// false: that cannot be told, and its group must not be signalled.
func waitExited(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil
		}
	}
}

// waitDelegate waits for cmd, a started delegate that leads its own process
// group (inRoot), and reaps it. It kills the whole group
//   - when stop is closed before the delegate exited (its call was
//     cancelled: the caller's context ended);
//   - once the delegate exited, when released does not report within
//     pipeGrace that no process holds the delegate's stdout and stderr any
//     more (a process it forked still holds the call open), or stop was
//     closed by then.
//
// The group is killed before the delegate is reaped, so that its id cannot
// name another group yet. A process the delegate left behind that let go of
// its stdout and stderr, and one that made a session of its own (a daemon),
// is left alone, as when the runtime runs the plugin itself. Returns
// cmd.Wait's error.
func waitDelegate(cmd *exec.Cmd, stop <-chan struct{}, released func(time.Duration) bool) error {
	pid := cmd.Process.Pid
	var mu sync.Mutex
	reaped := false
	exited := make(chan struct{})
	go func() {
		select {
		case <-stop:
			mu.Lock()
			if !reaped {
				killGroup(pid)
			}
			mu.Unlock()
		case <-exited:
		}
	}()
	if waitExited(pid) {
		kill := !released(pipeGrace)
		select {
		case <-stop:
			kill = true
		default:
		}
		mu.Lock()
		if kill {
			killGroup(pid)
		}
		reaped = true
		mu.Unlock()
	} else {
		mu.Lock()
		reaped = true
		mu.Unlock()
	}
	close(exited)
	return cmd.Wait()
}

// delegateIO is the caller's side of a delegate's stdin, stdout and stderr:
// three pipes whose other ends (Child) the delegate gets.
type delegateIO struct {
	inW, outR, errR *os.File
	// Child are the delegate's stdin, stdout and stderr; the caller closes
	// them (closeChild) once they are passed on.
	Child [3]*os.File

	stdout, stderr []byte
	readers        sync.WaitGroup // the stdout and stderr readers
	writer         sync.WaitGroup // the stdin writer
	eof            chan struct{}  // closed when both readers are done
}

func newDelegateIO() (*delegateIO, error) {
	d := &delegateIO{eof: make(chan struct{})}
	var opened []*os.File
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(opened...)
			return nil, err
		}
		opened = append(opened, r, w)
		if i == 0 {
			d.Child[0], d.inW = r, w
		} else {
			d.Child[i] = w
		}
		switch i {
		case 1:
			d.outR = r
		case 2:
			d.errR = r
		}
	}
	return d, nil
}

func (d *delegateIO) closeChild() { closeAll(d.Child[:]...) }

// start writes stdin and reads stdout and stderr in the background.
func (d *delegateIO) start(stdin []byte) {
	d.writer.Add(1)
	go func() { defer d.writer.Done(); _, _ = d.inW.Write(stdin); d.inW.Close() }()
	d.readers.Add(2)
	go func() { defer d.readers.Done(); d.stdout, _ = io.ReadAll(d.outR) }()
	go func() { defer d.readers.Done(); d.stderr, _ = io.ReadAll(d.errR) }()
	go func() { d.readers.Wait(); close(d.eof) }()
}

// released reports whether stdout and stderr reached EOF (no process holds
// them any more) within grace; false as soon as stop is closed.
func (d *delegateIO) released(grace time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-d.eof:
		return true
	case <-t.C:
		return false
	case <-stop:
		return false
	}
}

// finish stops the pipes and returns what was read: at once when stop is
// closed, else once stdout and stderr reach EOF, or after grace when a
// process outside the delegate's group still holds them.
func (d *delegateIO) finish(grace time.Duration, stop <-chan struct{}) (stdout, stderr []byte) {
	t := time.NewTimer(grace)
	select {
	case <-d.eof:
	case <-stop:
	case <-t.C:
	}
	t.Stop()
	// The files are pollable (os.Pipe): Close ends a pending Read or Write.
	closeAll(d.inW, d.outR, d.errR)
	d.readers.Wait()
	d.writer.Wait()
	return d.stdout, d.stderr
}
