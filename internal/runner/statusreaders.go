package runner

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"

	"github.com/afterhooks/helm-controller/internal/healthcheck"
)

// healthCheckReaders builds the status readers of compiled
// spec.healthCheckExprs on the REST mapper of the release's target cluster
// (which may be remote); nil when there are no expressions.
func (r *Runner) healthCheckReaders(build healthcheck.Readers) ([]engine.StatusReader, error) {
	if build == nil {
		return nil, nil
	}
	mapper, err := r.RESTMapper()
	if err != nil {
		return nil, fmt.Errorf("REST mapper for healthCheckExprs: %w", err)
	}
	return build(mapper), nil
}
