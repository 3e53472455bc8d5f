//go:build tools

// Package jaeger pins the Jaeger (v2) that 'cargo xtask envtest' builds, so
// that tests can read the traces OLM's services export.
package jaeger

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
