package attach

import "github.com/multinet/multinet/internal/node/cnirequest"

// podArgs is the pod identity of a request and the CNI_ARGS pairs passed on
// to every delegate (cnirequest.Args).
type podArgs = cnirequest.Args

// parseArgs splits recorded CNI_ARGS (cnirequest.ParseArgs).
func parseArgs(s string) (podArgs, error) { return cnirequest.ParseArgs(s) }
