// Package archtest holds no code: its tests fail when the node agent's
// architecture drifts from what docs/architecture.md describes. The CNI
// engine (internal/node/attach) takes requests decoded once at the server's edge
// (internal/node/cnirequest), never the shim's wire type (internal/node/cniserver/api), and
// does not import the server (internal/node/cniserver); its exported surface is the
// CNI verbs and little else. Which packages each daemon links is
// internal/checks/depgraph's test.
package archtest
