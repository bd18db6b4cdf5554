// Package version holds the build's version and the -version flag shared by
// multinet's daemons (multinetd, multinet-webhook, multinet-deviceplugin,
// multinet-dra-driver).
package version

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

// Version is stamped at build time:
// -ldflags "-X github.com/multinet/multinet/internal/process/version.Version=TAG"
// (hack/images.sh); "dev" otherwise.
var Version = "dev"

// Flag registers -version on flag.CommandLine; pass its value to Handle
// after flag.Parse.
func Flag() *bool {
	return flag.Bool("version", false, "print the version and exit")
}

// Handle prints Version and exits 0 when show is set; otherwise it logs
// "<component> starting" with the version (klog, level 0).
func Handle(show bool, component string) {
	if show {
		fmt.Println(Version)
		os.Exit(0)
	}
	klog.InfoS(component+" starting", "version", Version)
}

// ParseFlags is a daemon's command line after its flags are registered on
// flag.CommandLine: it sets the usage text ("Usage: <argv0> [flags]",
// summary, the flags), registers -version, parses os.Args, handles
// -version (Handle) and exits 2 with the usage on positional arguments,
// which no daemon takes.
func ParseFlags(component, summary string) {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags]\n\n%s\n\nFlags:\n", os.Args[0], summary)
		flag.PrintDefaults()
	}
	showVersion := Flag()
	flag.Parse()
	Handle(*showVersion, component)
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
}
