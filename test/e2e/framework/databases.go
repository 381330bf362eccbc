package framework

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/test/databasecrd"
)

// DatabaseGroup is the group of the Database CRD the immutable-cr chart's
// custom resource belongs to (see test/databasecrd).
const DatabaseGroup = "e2e.afterhooks.io"

// DatabaseCRD installs the Database CRD unless it is there, and waits
// until it is served. It stays for the cluster's life: parallel tests
// share it.
func (e *Env) DatabaseCRD(t testing.TB) {
	t.Helper()
	if err := e.Client.Create(context.Background(), databasecrd.CRD(DatabaseGroup)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the Database CRD: %v", err)
	}
	e.Eventually(t, time.Minute, "the Database CRD served", func(ctx context.Context) error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(DatabaseGroup + "/v1")
		list.SetKind(databasecrd.Kind + "List")
		return e.Client.List(ctx, list, client.InNamespace("default"))
	})
}

// Database reads the Database ns/name.
func (e *Env) Database(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	db := &unstructured.Unstructured{}
	db.SetAPIVersion(DatabaseGroup + "/v1")
	db.SetKind(databasecrd.Kind)
	if err := e.Get(context.Background(), db, ns, name); err != nil {
		t.Fatalf("reading Database %s/%s: %v", ns, name, err)
	}
	return db
}

// OwnedClaim creates the PersistentVolumeClaim name in owner's namespace
// with an ownerReference to owner, as an operator does, and returns its
// UID.
func (e *Env) OwnedClaim(t testing.TB, owner *unstructured.Unstructured, name string) types.UID {
	t.Helper()
	pvc := databasecrd.OwnedClaim(owner.GetNamespace(), name, metav1.OwnerReference{
		APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()})
	if err := e.Client.Create(context.Background(), pvc); err != nil {
		t.Fatalf("creating PersistentVolumeClaim %s: %v", name, err)
	}
	return pvc.UID
}
