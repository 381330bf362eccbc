package recreate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Each guard on its own: what it reads, and what it says.
func TestGuardChecks(t *testing.T) {
	shop := Policy{Release: Release{Name: "shop", Namespace: "shop"}}
	tests := []struct {
		name    string
		check   func(Refused, *unstructured.Unstructured) string
		kind    schema.GroupKind
		desired map[string]string
		live    *unstructured.Unstructured
		want    string // "" when it lets the object go
	}{
		{name: "keep: neither", check: keptByPolicy, live: object(jobKind, "a", nil)},
		{name: "keep: manifest first", check: keptByPolicy, desired: map[string]string{resourcePolicy: "keep"},
			live: object(jobKind, "a", map[string]string{resourcePolicy: "keep"}), want: "its manifest says helm.sh/resource-policy: keep"},
		{name: "keep: another policy value", check: keptByPolicy, live: object(jobKind, "a", map[string]string{resourcePolicy: "delete"})},
		{name: "opted out in the cluster", check: optedOutInCluster, live: object(jobKind, "a", map[string]string{Annotation: Disabled}),
			want: "the object in the cluster says helm.toolkit.fluxcd.io/force: disabled"},
		{name: "enabled in the cluster: no opinion", check: optedOutInCluster, live: object(jobKind, "a", enabled)},
		{name: "no release annotations", check: shop.otherRelease, live: object(jobKind, "a", nil)},
		{name: "same release", check: shop.otherRelease, live: object(jobKind, "a", releaseOfOwn)},
		{name: "same name, another namespace", check: shop.otherRelease,
			live: object(jobKind, "a", map[string]string{releaseNameAnno: "shop", releaseNamespaceAnno: "other"}), want: "it belongs to release other/shop"},
		{name: "release unknown: not checked", check: Policy{}.otherRelease,
			live: object(jobKind, "a", map[string]string{releaseNameAnno: "other", releaseNamespaceAnno: "other"})},
		{name: "only the garbage collector's finalizers", check: externalFinalizers,
			live: object(jobKind, "a", nil, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents)},
		{name: "two external finalizers", check: externalFinalizers, live: object(svcKind, "a", nil, "service.kubernetes.io/load-balancer-cleanup", "example.com/x"),
			want: "it has the finalizer service.kubernetes.io/load-balancer-cleanup, example.com/x:"},
		{name: "not a Job: not asked whether it finished", check: unfinishedJob, kind: deployKind, live: object(deployKind, "a", nil)},
		{name: "a finished Job", check: unfinishedJob, kind: jobKind, live: object(jobKind, "a", nil)},
		{name: "a Job whose conditions are False", check: unfinishedJob, kind: jobKind,
			live: withConditions(object(jobKind, "a", nil), "Complete", "False"), want: "has not finished"},
		{name: "a Job with a condition that is not a map", check: unfinishedJob, kind: jobKind,
			live: withStatus(object(jobKind, "a", nil), map[string]any{"conditions": []any{"Complete"}}), want: "has not finished"},
		{name: "a Job without status", check: unfinishedJob, kind: jobKind, live: withStatus(object(jobKind, "a", nil), nil), want: "has not finished"},
		{name: "a suspended Job", check: unfinishedJob, kind: jobKind,
			live: withConditions(object(jobKind, "a", nil), "Suspended", "True"), want: "has not finished"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := tt.kind
			if kind.Empty() {
				kind = jobKind
			}
			got := tt.check(Refused{Kind: kind, Desired: object(kind, "", tt.desired)}, tt.live)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("check = %q, want %q", got, tt.want)
			}
		})
	}
}

func withStatus(u *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	if status == nil {
		delete(u.Object, "status")
		return u
	}
	u.Object["status"] = status
	return u
}

func withConditions(u *unstructured.Unstructured, condition, status string) *unstructured.Unstructured {
	return withStatus(u, map[string]any{"conditions": []any{map[string]any{"type": condition, "status": status}}})
}

// The order of the decisions: kinds never recreated and opt-outs before
// anything is read; the guards before the dry run; the dry run before
// consent decides; nothing is deleted unless all agree.
func TestRecreateSteps(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "migrate", errors.New("uid precondition"))
	tests := []struct {
		name       string
		dryRunErr  error
		deleteErr  error
		readErr    bool
		wantErr    string
		wantCreate bool
	}{
		{name: "the dry run sees no object", dryRunErr: errNone, wantErr: "the API server did not see the existing object"},
		{name: "replaced meanwhile", deleteErr: conflict, wantErr: "it was replaced while the controller looked at it"},
		{name: "deleted meanwhile: created", deleteErr: apierrors.NewNotFound(schema.GroupResource{Resource: "jobs"}, "migrate"), wantCreate: true},
		{name: "the delete fails", deleteErr: errors.New("forbidden"), wantErr: "not recreated: deleting it failed: forbidden"},
		{name: "reading it fails", readErr: true, wantErr: "not recreated: reading it failed: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dryRunErr := tt.dryRunErr
			if dryRunErr == nil {
				dryRunErr = alreadyThere
			} else if dryRunErr == errNone {
				dryRunErr = nil
			}
			var cluster Object = &fakeObject{live: object(jobKind, "a", nil), dryRunErr: dryRunErr, deleteErr: tt.deleteErr}
			if tt.readErr {
				cluster = unreadable{}
			}
			r := Refused{Object: "Job/shop/migrate", Kind: jobKind, Desired: object(jobKind, "", enabled), Cause: templateRefusal,
				Cluster: cluster, Dependents: &fakeDependents{}}
			created := false
			_, err := Policy{}.Recreate(context.Background(), r, func(context.Context) error { created = true; return nil })
			if created != tt.wantCreate {
				t.Errorf("created %v, want %v", created, tt.wantCreate)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Recreate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Recreate = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// errNone stands for a dry run that succeeds.
var errNone = errors.New("none")

// unreadable is an object whose reads fail.
type unreadable struct{}

func (unreadable) Live(context.Context) (*unstructured.Unstructured, error) {
	return nil, errors.New("connection refused")
}
func (unreadable) DryRunCreate(context.Context) error { return nil }
func (unreadable) Delete(context.Context, types.UID, metav1.DeletionPropagation) error {
	return nil
}

// The memory remembers an object by UID and manifest, forgets the oldest
// past its limit, and a nil memory remembers nothing.
func TestMemory(t *testing.T) {
	m := NewMemory()
	a := object(jobKind, "", enabled)
	m.remember("one", a)
	if m.recreated("one", a).IsZero() {
		t.Error("the object just remembered is not known")
	}
	if !m.recreated("one", object(jobKind, "", nil)).IsZero() {
		t.Error("another manifest is known")
	}
	if !m.recreated("two", a).IsZero() {
		t.Error("another object is known")
	}
	m.remember("", a)
	if !m.recreated("", a).IsZero() {
		t.Error("an object without UID was remembered")
	}
	for i := range memoryLimit {
		m.remember(types.UID("n"+time.Duration(i).String()), a)
	}
	if !m.recreated("one", a).IsZero() || len(m.entries) != memoryLimit || len(m.order) != memoryLimit {
		t.Errorf("past the limit: oldest kept %v, %d entries, %d in order", !m.recreated("one", a).IsZero(), len(m.entries), len(m.order))
	}
	var none *Memory
	none.remember("one", a)
	if !none.recreated("one", a).IsZero() {
		t.Error("a nil memory remembered")
	}
}

// A recreate with a memory remembers the new object, so the same refusal
// right after is reported instead of recreated again.
func TestRecreateRemembersTheNewObject(t *testing.T) {
	mem := NewMemory()
	cluster := &fakeObject{live: object(jobKind, "a", nil), dryRunErr: alreadyThere}
	r := Refused{Object: "Job/shop/migrate", Kind: jobKind, Desired: object(jobKind, "", enabled), Cause: templateRefusal,
		Cluster: cluster, Dependents: &fakeDependents{}}
	fresh := object(jobKind, "b", nil)
	_, err := Policy{Memory: mem}.Recreate(context.Background(), r, func(context.Context) error {
		cluster.live, cluster.deleted = fresh, nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mem.recreated("b", r.Desired).IsZero() {
		t.Error("the new object was not remembered")
	}
}
