// Package e2e holds drover's end-to-end tests. They build the drover binary
// once, start `drover agent -dev` as a user would (each test on its own
// ports and data dir), and drive it through the CLI and the v1 HTTP API,
// checking what a user sees: command output and exit codes, API answers,
// and the real processes the raw_exec driver runs.
//
// The package has no non-test code; this file only carries its doc.
package e2e
