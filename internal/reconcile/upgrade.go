package reconcile

import (
	"context"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

// upgrade runs a Helm upgrade to the desired chart and values; see release.
func (m *Machine) upgrade(ctx context.Context, req *Request) error {
	return m.release(ctx, req, helmv2.ReleaseActionUpgrade)
}
