// Package chartgen composes small Helm charts from a grammar of features,
// drawn from a seed, for the generated parity scenarios
// (TestGeneratedParity in test/e2e): hooks of every phase with weights,
// delete policies and Job TTLs; workloads that are ready, slow,
// crash-looping or waiting for what a hook creates; objects whose
// immutable fields change on upgrade, with and without the recreate
// consent; objects kept by `helm.sh/resource-policy: keep`; a CRD in
// crds/ with a custom resource of it. The same seed always gives the same
// scenario, so a failing seed reproduces it.
//
// A scenario's chart reads two values: `revision`, which every upgrade
// raises (a ConfigMap and the workloads' pod templates change), and
// `immutable`, which an immutable upgrade raises too (the immutable
// fields change). The workload simulator (test/simulator) plays the pods
// through annotations.
package chartgen
