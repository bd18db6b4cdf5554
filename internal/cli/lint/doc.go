// Package lint checks Kubernetes manifests offline against the NPWG
// multi-net spec v1.3 the way multinet's webhook and daemon would: the
// NetworkAttachmentDefinitions (§3) and the network selection annotations of
// pods and pod templates (§4), each selection against the
// NetworkAttachmentDefinitions of the same input. It is the logic of
// "kubectl multinet lint" (docs/kubectl-multinet.md).
//
// Decode reads YAML or JSON streams into Objects; Lint returns one Result per
// Object; WriteText and WriteJSON print them. The rules are those of
// pkg/spec/podnetworks (Check, CheckNAD), which the webhook and multinetd apply,
// so lint, admission and the daemon cannot disagree. The package does no I/O of its own beyond the
// writers it is given and keeps no global state.
package lint
