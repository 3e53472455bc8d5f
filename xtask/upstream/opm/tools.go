//go:build tools

// Package opm pins upstream's opm command, built by 'cargo xtask upstream'.
package opm

import _ "github.com/operator-framework/operator-registry/cmd/opm"
