package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multinet/multinet/internal/cli/lint"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// stdinName is the Source file name of objects read from standard input.
const stdinName = "<stdin>"

type lintOptions struct {
	files       []string
	output      string
	namespace   string
	requireNADs bool
	policy      *policyFlags
	// trustFile is --nad-trust-policy; cluster is --cluster, whose API
	// clients tests replace.
	trustFile string
	cluster   bool
	clients   clientsFunc
}

func newLintCommand(s Streams) *cobra.Command {
	cmd, _ := lintCommand(s)
	return cmd
}

// lintCommand returns the lint command and its options, whose clients tests
// replace.
func lintCommand(s Streams) (*cobra.Command, *lintOptions) {
	o := &lintOptions{}
	cmd := &cobra.Command{
		Use:   "lint -f FILENAME [-f FILENAME ...]",
		Short: "Check NetworkAttachmentDefinitions and pod network annotations in manifests, offline",
		Long: `Check manifests against the NPWG multi-net spec v1.3 without a cluster.

Checks NetworkAttachmentDefinitions (name, resourceName annotation, spec.config
as CNI JSON) and the k8s.v1.cni.cncf.io/networks annotation of Pods and of the
pod templates of Deployments, StatefulSets, DaemonSets, ReplicaSets,
ReplicationControllers, Jobs, CronJobs and PodTemplates, each network against
the NetworkAttachmentDefinitions of the same input, by the rules the admission
webhook and multinetd apply. Set --namespace-isolation, --global-namespaces,
--default-networks and --system-namespaces as multinetd is configured to get
its verdict. Other kinds are skipped.

--nad-trust-policy FILE also checks each NetworkAttachmentDefinition against
that NAD trust policy (docs/nad-trust.md), with the labels of the input's
Namespace objects. --cluster checks the NetworkAttachmentDefinitions stored in
the cluster instead of files, against --nad-trust-policy or else the cluster's
ConfigMap multinet-system/multinet-nad-trust (else the shipped policy), and
lists those that break it.

Exit status: 0 all valid, 1 some object invalid, 2 unreadable input or bad usage.`,
		Example: `  kubectl multinet lint -f nads.yaml -f deploy.yaml
  kubectl multinet lint -f manifests/ -o json
  helm template . | kubectl multinet lint -f - --require-nads
  kubectl multinet lint --cluster --global-namespaces=default
  kubectl multinet lint -f nads/ --nad-trust-policy nad-trust.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.cluster {
				return o.runCluster(cmd.Context(), s)
			}
			return o.run(s)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "manifest file, directory of .yaml/.yml/.json files, or - for standard input (repeatable)")
	f.StringVarP(&o.output, "output", "o", "", "output format: empty for one line per object, wide to add notes, json for a JSON list")
	f.StringVarP(&o.namespace, "namespace", "n", lint.DefaultNamespace, "namespace of objects that set none")
	f.BoolVar(&o.requireNADs, "require-nads", false, "a selected NetworkAttachmentDefinition missing from the input is an error (default: only when the input defines others in its namespace)")
	o.policy = addPolicyFlags(cmd)
	f.StringVar(&o.trustFile, "nad-trust-policy", "", "NAD trust policy file (docs/nad-trust.md): check each NAD's plugin types and host-reaching keys against it")
	f.BoolVar(&o.cluster, "cluster", false, "check the cluster's stored NetworkAttachmentDefinitions (every namespace) instead of -f, and list those that break the NAD trust policy")
	o.clients = addLintClusterFlags(cmd)
	return cmd, o
}

func (o *lintOptions) run(s Streams) error {
	if len(o.files) == 0 {
		return &ExitError{Code: ExitUsage, Err: errors.New("lint: at least one -f FILENAME is required")}
	}
	if !slices.Contains([]string{"", "wide", "json"}, o.output) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("lint: --output %q: must be empty, wide or json", o.output)}
	}
	if msgs := validation.IsDNS1123Label(o.namespace); len(msgs) > 0 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("lint: --namespace %q: %s", o.namespace, strings.Join(msgs, "; "))}
	}
	policy, err := o.lintPolicy()
	if err != nil {
		return err
	}
	objs, err := readObjects(o.files, s.In)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if len(objs) == 0 {
		fmt.Fprintln(s.ErrOut, "warning: no objects in the input")
	}
	results, err := lint.Lint(objs, lint.Options{Namespace: o.namespace, RequireNADs: o.requireNADs, Policy: policy})
	if err != nil {
		return err
	}
	return o.report(s, results)
}

// report writes results in --output's format; ExitInvalid when one is
// invalid.
func (o *lintOptions) report(s Streams, results []lint.Result) error {
	var err error
	if o.output == "json" {
		err = lint.WriteJSON(s.Out, results)
	} else {
		err = lint.WriteText(s.Out, results, o.output == "wide")
	}
	if err != nil {
		return err
	}
	if lint.Invalid(results) {
		return &ExitError{Code: ExitInvalid}
	}
	return nil
}

// readObjects decodes every input; the error lists every input that cannot
// be read or decoded, one per line.
func readObjects(files []string, stdin io.Reader) ([]lint.Object, error) {
	var objs []lint.Object
	var errs []error
	readStdin := false
	for _, name := range files {
		if name == "-" {
			if readStdin {
				errs = append(errs, errors.New("-f -: standard input given twice"))
				continue
			}
			readStdin = true
			data, err := io.ReadAll(stdin)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", stdinName, err))
				continue
			}
			objs, errs = decodeInto(objs, errs, data, stdinName)
			continue
		}
		paths, err := expand(name)
		if err != nil {
			errs = append(errs, pathError(err))
			continue
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				errs = append(errs, pathError(err))
				continue
			}
			objs, errs = decodeInto(objs, errs, data, p)
		}
	}
	return objs, errors.Join(errs...)
}

// pathError turns "open FILE: no such file or directory" into
// "FILE: no such file or directory", the form of the decode errors.
func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

func decodeInto(objs []lint.Object, errs []error, data []byte, name string) ([]lint.Object, []error) {
	more, err := lint.Decode(data, name)
	if err != nil {
		return objs, append(errs, err)
	}
	return append(objs, more...), errs
}

// expand returns name, or for a directory the .yaml, .yml and .json files
// directly in it, in lexical order (as kubectl apply -f DIR without -R).
func expand(name string) ([]string, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{name}, nil
	}
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				paths = append(paths, filepath.Join(name, e.Name()))
			}
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json files in the directory", name)
	}
	return paths, nil
}

// lintPolicy is the policy flags' podnetworks.Policy with the NAD trust
// policy of --nad-trust-policy, when given (a usage error when it cannot
// be read).
func (o *lintOptions) lintPolicy() (podnetworks.Policy, error) {
	policy, err := o.policy.policy()
	if err != nil {
		return policy, err
	}
	if o.trustFile != "" {
		if policy.NADTrust.Policy, err = podnetworks.ReadNADTrustPolicy(o.trustFile); err != nil {
			return policy, &ExitError{Code: ExitUsage, Err: fmt.Errorf("lint: --nad-trust-policy: %w", err)}
		}
	}
	return policy, nil
}
