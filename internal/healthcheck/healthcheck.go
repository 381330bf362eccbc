// Package healthcheck turns a HelmRelease's spec.healthCheckExprs into
// kstatus status readers, so that every readiness wait (Helm's own and the
// afterHooks wait) judges the matching custom resources by the user's CEL
// expressions instead of kstatus' generic rules.
//
// The evaluation itself is fluxcd/pkg/runtime/cel's, the one
// kustomize-controller and upstream helm-controller use, so an expression
// means the same thing everywhere in Flux:
//
//   - an object whose status.observedGeneration (an integer) differs from
//     metadata.generation is InProgress, whatever the expressions say;
//   - otherwise inProgress is evaluated first, then failed, then current;
//     the first that is true decides (InProgress, Failed, Current);
//   - when none is true the object is InProgress;
//   - an expression that cannot be evaluated against the object (a missing
//     field without has()) makes the object's status Unknown with the CEL
//     error as message, so the wait runs into its timeout naming it.
//
// An entry without kind applies to every kind of its API group. Two entries
// for the same group and kind are an error, as upstream.
package healthcheck

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/apis/kustomize"
	runtimecel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Readers builds the status readers of a set of compiled expressions for
// one REST mapper. It is nil when there are no expressions.
type Readers func(mapper meta.RESTMapper) []engine.StatusReader

// Compile parses every expression of exprs. It returns nil Readers and no
// error for an empty list, and an error naming the offending entry when an
// expression does not parse, current is missing, or two entries cover the
// same group and kind: what upstream refuses. It never evaluates anything,
// so it is cheap enough to run before every Helm action.
func Compile(exprs []kustomize.CustomHealthCheck) (Readers, error) {
	if len(exprs) == 0 {
		return nil, nil
	}
	newReader, err := runtimecel.NewStatusReader(exprs)
	if err != nil {
		return nil, fmt.Errorf("invalid healthCheckExprs: %w", err)
	}
	// Messages name the expressions; kstatus would otherwise report a
	// Failed or InProgress custom resource without saying why.
	byGroupKind := make(map[schema.GroupKind]kustomize.HealthCheckExpressions, len(exprs))
	for _, hc := range exprs {
		byGroupKind[groupKindOf(hc)] = hc.HealthCheckExpressions
	}
	return func(mapper meta.RESTMapper) []engine.StatusReader {
		return []engine.StatusReader{&explainingReader{StatusReader: newReader(mapper), exprs: byGroupKind}}
	}, nil
}

// Warnings names the entries whose apiVersion names no API group other
// than the core group's v1: empty, not group/version, or a group without
// its version ("apps"). Upstream, and Compile with it, read such an
// apiVersion as the core group (""), so the entry judges that group's kind,
// or the whole group, instead of the kind the user meant.
func Warnings(exprs []kustomize.CustomHealthCheck) []string {
	var warnings []string
	for i, hc := range exprs {
		gv, err := schema.ParseGroupVersion(hc.APIVersion)
		if err == nil && (gv.Group != "" || gv.Version == "v1") {
			continue
		}
		covers := "every kind of the core API group"
		if hc.Kind != "" {
			covers = fmt.Sprintf("kind %q of the core API group", hc.Kind)
		}
		warnings = append(warnings, fmt.Sprintf("healthCheckExprs[%d].apiVersion %q is not group/version (e.g. apps/v1): the entry judges %s, as in upstream helm-controller",
			i, hc.APIVersion, covers))
	}
	return warnings
}

// groupKindOf is the group and kind an entry applies to; the kind is empty
// for an entry that covers its whole group.
func groupKindOf(hc kustomize.CustomHealthCheck) schema.GroupKind {
	gk := schema.FromAPIVersionAndKind(hc.APIVersion, hc.Kind).GroupKind()
	if hc.Kind == "" {
		gk.Kind = ""
	}
	return gk
}

// explainingReader adds a message to the statuses the CEL reader returns
// without one, naming the expression that decides them.
type explainingReader struct {
	engine.StatusReader
	exprs map[schema.GroupKind]kustomize.HealthCheckExpressions
}

func (r *explainingReader) ReadStatus(ctx context.Context, reader engine.ClusterReader, id object.ObjMetadata) (*event.ResourceStatus, error) {
	rs, err := r.StatusReader.ReadStatus(ctx, reader, id)
	r.explain(rs)
	return rs, err
}

func (r *explainingReader) ReadStatusForObject(ctx context.Context, reader engine.ClusterReader, obj *unstructured.Unstructured) (*event.ResourceStatus, error) {
	rs, err := r.StatusReader.ReadStatusForObject(ctx, reader, obj)
	r.explain(rs)
	return rs, err
}

func (r *explainingReader) explain(rs *event.ResourceStatus) {
	if rs == nil || rs.Message != "" {
		return
	}
	if rs.Error != nil {
		// Helm's waiter reports only the message; without this an
		// expression that cannot be evaluated would fail the wait silently.
		rs.Message = "healthCheckExprs: " + rs.Error.Error()
		return
	}
	exprs, ok := r.exprs[rs.Identifier.GroupKind]
	if !ok {
		exprs, ok = r.exprs[schema.GroupKind{Group: rs.Identifier.GroupKind.Group}]
	}
	if !ok {
		return
	}
	rs.Message = Explain(rs.Status, exprs)
}

// Explain words what the status of an object judged by exprs means.
func Explain(s status.Status, exprs kustomize.HealthCheckExpressions) string {
	switch s {
	case status.FailedStatus:
		return fmt.Sprintf("healthCheckExprs: failed expression is true: %s", exprs.Failed)
	case status.InProgressStatus:
		return fmt.Sprintf("healthCheckExprs: waiting for the current expression to be true: %s", exprs.Current)
	case status.CurrentStatus:
		return fmt.Sprintf("healthCheckExprs: current expression is true: %s", exprs.Current)
	}
	return ""
}
