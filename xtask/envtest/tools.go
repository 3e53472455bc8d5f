//go:build tools

// Package envtest pins the control-plane commands that 'cargo xtask envtest'
// builds. Nothing here is part of the product.
package envtest

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
