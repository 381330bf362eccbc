// Package parity compares what upstream helm-controller and this
// controller showed of the same scenario, step by step. An Observation is
// one step's normalised reading of the HelmRelease, Helm storage and the
// cluster (no time, uid or duration, the side's namespace as <ns>);
// Compare lists, as table rows, every field where ours differs from
// upstream and the caller's list of expected differences does not name.
//
// It holds no cluster code, so that the comparison itself is tested fast
// (planted differences on recorded observations, testdata/) and reused by
// every differential test: test/e2e's real-chart and generated scenarios
// read the cluster and hand their observations here.
package parity
