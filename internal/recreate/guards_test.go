package recreate

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var (
	deployKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	rsKind     = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	svcKind    = schema.GroupKind{Kind: "Service"}
	cmKind     = schema.GroupKind{Kind: "ConfigMap"}
	sliceKind  = schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}
)

// What a recreate would lose with an object: only what the new object
// makes again by itself may go.
func TestDependentsLost(t *testing.T) {
	tests := []struct {
		name   string
		kind   schema.GroupKind
		owners Owners
		// want is a part of the refusal; "" means nothing is lost.
		want string
	}{
		{name: "nothing owned", kind: jobKind},
		{name: "a Job's pods", kind: jobKind, owners: Owners{"a": {dep(podKind, "p1"), dep(podKind, "p2")}}},
		{name: "a custom resource owned by a Job", kind: jobKind, owners: Owners{"a": {dep(podKind, "p1"), dep(crKind, "db")}},
			want: "it owns Database/shop/db, which a recreate would delete with it (a new Job makes again only its Pods)"},
		{name: "a custom resource owned by a Service", kind: svcKind, owners: Owners{"a": {dep(sliceKind, "s1"), dep(crKind, "db")}},
			want: "it owns Database/shop/db, which a recreate would delete with it (a new Service makes again only its EndpointSlices)"},
		{name: "a Service's EndpointSlices", kind: svcKind, owners: Owners{"a": {dep(sliceKind, "s1")}}},
		{name: "a Secret owned by a ConfigMap", kind: cmKind, owners: Owners{"a": {dep(schema.GroupKind{Kind: "Secret"}, "token")}},
			want: "it owns Secret/shop/token, which a recreate would delete with it (a new ConfigMap makes none of them again)"},
		{name: "a Deployment's ReplicaSets and their pods", kind: deployKind,
			owners: Owners{"a": {dep(rsKind, "rs1")}, "rs1": {dep(podKind, "p1")}}},
		{name: "a custom resource owned by a Deployment's pod", kind: deployKind,
			owners: Owners{"a": {dep(rsKind, "rs1")}, "rs1": {dep(podKind, "p1")}, "p1": {dep(crKind, "lease")}},
			want:   "it owns Database/shop/lease (through Pod/shop/p1), which a recreate would delete"},
		{name: "a pod owned by a Deployment directly is not its own", kind: deployKind, owners: Owners{"a": {dep(podKind, "p1")}},
			want: "it owns Pod/shop/p1, which a recreate would delete with it (a new Deployment makes again only its ReplicaSets)"},
		{name: "a claim under a pod: data", kind: jobKind, owners: Owners{"a": {dep(podKind, "p1")}, "p1": {dep(pvcKind, "scratch")}},
			want: "it owns PersistentVolumeClaim/shop/scratch (through Pod/shop/p1), whose data a recreate would delete"},
		{name: "data first", kind: jobKind, owners: Owners{"a": {dep(crKind, "db"), dep(pvcKind, "data")}},
			want: "it owns PersistentVolumeClaim/shop/data, whose data"},
		{name: "an ownership cycle ends", kind: deployKind, owners: Owners{"a": {dep(rsKind, "rs1")}, "rs1": {dep(rsKind, "rs2")}, "rs2": {dep(rsKind, "rs1")}},
			want: "it owns ReplicaSet/shop/rs2 (through ReplicaSet/shop/rs1)"},
		{name: "objects of other owners do not count", kind: cmKind, owners: Owners{"b": {dep(crKind, "db")}}},
		{name: "a StatefulSet's pods and revisions", kind: stsKind, owners: Owners{"a": {dep(podKind, "db-0"), dep(controllerRevisionKind, "db-1a2b")}}},
		{name: "a StatefulSet's claim kept on delete: data", kind: stsKind, owners: Owners{"a": {dep(podKind, "db-0"), dep(pvcKind, "data-db-0")}},
			want: "it owns PersistentVolumeClaim/shop/data-db-0, whose data a recreate would delete"},
		{name: "a CronJob's Jobs and their pods", kind: schema.GroupKind{Group: "batch", Kind: "CronJob"},
			owners: Owners{"a": {dep(jobKind, "nightly-1")}, "nightly-1": {dep(podKind, "nightly-1-x")}}},
		{name: "a custom resource owning a Pod: every dependent counts", kind: crKind, owners: Owners{"a": {dep(podKind, "p1")}},
			want: "it owns Pod/shop/p1, which a recreate would delete with it (a custom resource's dependents may hold data)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Refused{Kind: tt.kind, Dependents: &fakeDependents{owners: tt.owners}}
			got, err := dependentsLost(context.Background(), r, object(tt.kind, types.UID("a"), nil))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("dependentsLost = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDependentsLostWithoutALister(t *testing.T) {
	if _, err := dependentsLost(context.Background(), Refused{Kind: jobKind}, object(jobKind, "a", nil)); err == nil {
		t.Error("no Dependents: want an error, nothing may be shown safe")
	}
}

// The refusal says what a new object of the kind makes again.
func TestRemadeNote(t *testing.T) {
	for kind, want := range map[schema.GroupKind]string{
		jobKind:    "a new Job makes again only its Pods",
		stsKind:    "a new StatefulSet makes again only its Pods and ControllerRevisions",
		deployKind: "a new Deployment makes again only its ReplicaSets",
		cmKind:     "a new ConfigMap makes none of them again",
	} {
		if got := remadeNote(kind); got != want {
			t.Errorf("remadeNote(%s) = %q, want %q", kind, got, want)
		}
	}
}
