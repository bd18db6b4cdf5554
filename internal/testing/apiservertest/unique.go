package apiservertest

import (
	"strconv"
	"sync"
	"testing"
)

var (
	runsMu sync.Mutex
	runs   = map[string]int{}     // test name -> runs started in this process
	runOf  = map[testing.TB]int{} // test -> which of its name's runs it is
)

// Name returns the name of an object of the shared server for the test tb:
// base on the test's first run in this process, base-r2, base-r3, ... on
// later runs, the same for every call within one run. A test run again in
// the same process (go test -count=N, the flake hunt) meets what its earlier
// runs left on the shared server, and namespaces in particular cannot be
// deleted without a controller manager; Name keeps the runs apart. base
// must leave room for the suffix within the kind's name limit.
func Name(tb testing.TB, base string) string {
	runsMu.Lock()
	defer runsMu.Unlock()
	n, ok := runOf[tb]
	if !ok {
		runs[tb.Name()]++
		n = runs[tb.Name()]
		runOf[tb] = n
	}
	if n == 1 {
		return base
	}
	return base + "-r" + strconv.Itoa(n)
}
