// Package archtest holds no code: its tests fail when the node agent's
// architecture drifts from what docs/architecture.md describes. The CNI
// engine (pkg/attach) takes requests decoded once at the server's edge
// (pkg/cnirequest), never the shim's wire type (pkg/cniserver/api), and
// does not import the server (pkg/cniserver); its exported surface is the
// CNI verbs and little else. Which packages each daemon links is
// internal/depgraph's test.
package archtest
