// Package plancmd is the command line of `helm-controller plan`: it reads
// a HelmRelease (live, or from a file with the live status), its chart (a
// local directory or archive, or the source's artifact as the controller
// fetches it) and its values (composed as the controller composes them,
// plus local values files), previews the next reconcile (internal/preview)
// and prints it as text or JSON.
//
// Exit codes are those of `flux diff`: 0 no change, 1 changes, 2 an
// error, always as one line on stderr. The command only reads and sends
// dry-run requests; it changes nothing.
package plancmd
