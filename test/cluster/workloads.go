package cluster

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/test/simulator"
)

// workloadModel is the seam between the cluster and whatever decides how pods
// behave: kwok applies stages, and a controller may drive pods between them.
// The cluster knows nothing else about it.
type workloadModel struct {
	// stages returns kwok Stage documents (a multi-document YAML stream).
	stages func() ([]byte, error)
	// run drives pods until ctx is done; nil when the stages need no help.
	run func(ctx context.Context, cfg *rest.Config) error
}

// defaultWorkloads is the workload simulator of test/simulator.
var defaultWorkloads = workloadModel{
	stages: simulator.KwokStages,
	run:    simulator.Run,
}
