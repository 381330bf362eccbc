// Package chartserver serves Helm charts to end-to-end tests from inside the
// test process.
//
// The e2e suite runs Flux's real source-controller next to the controller
// under test, all on one machine. Rather than depending on public chart
// repositories, a test starts a Server, packages chart directories into it and
// points Flux sources at it:
//
//   - HelmRepositoryURL is a classic Helm HTTP repository (an index.yaml plus
//     packaged .tgz archives) for a HelmRepository of the default type.
//   - OCIRepositoryURL is an in-memory OCI registry speaking plain HTTP. Every
//     chart is pushed as a Helm OCI artifact to <OCIRepositoryURL>/<name>,
//     tagged with its version, so it works both for a HelmRepository with
//     `type: oci` and for an OCIRepository with `insecure: true` and a
//     layerSelector on the Helm chart content media type.
//
// Both listeners are bound to 127.0.0.1 on free ports. That address is
// reachable by source-controller only because it runs on the same host as the
// test process; nothing is exposed beyond loopback.
//
// Chart directories are only read: AddChart loads the directory, applies the
// requested overrides (version, name, values) to the in-memory chart and
// packages it in a private temporary directory. This lets a test publish
// several versions and small variants of one read-only chart.
package chartserver
